// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// probeKind names a container probe, as the kubelet's events do.
type probeKind string

const (
	livenessProbe  probeKind = "Liveness"
	readinessProbe probeKind = "Readiness"
	startupProbe   probeKind = "Startup"
)

// probeWorker runs one probe of one container run, as the kubelet's prober
// worker does (k8s.io/kubernetes pkg/kubelet/prober/worker.go): every
// periodSeconds from the container's start, skipping the runs before
// initialDelaySeconds; the result changes only after successThreshold
// consecutive successes or failureThreshold consecutive failures; each
// failed run is reported to onFail (the kubelet's "Unhealthy" event).
type probeWorker struct {
	kind     probeKind
	probe    *corev1.Probe
	spec     *corev1.Container
	podIP    string
	started  time.Time
	onResult func(ok bool, msg string) // a new result reached its threshold
	onFail   func(msg string)          // one run failed
}

// run probes until ctx ends. A liveness or startup worker stops after it
// reports a failure: the container is killed and a new run gets new workers.
func (w probeWorker) run(ctx context.Context) {
	period := time.Duration(max(w.probe.PeriodSeconds, 1)) * time.Second
	delay := time.Duration(w.probe.InitialDelaySeconds) * time.Second
	succ, fail := int(max(w.probe.SuccessThreshold, 1)), int(max(w.probe.FailureThreshold, 1))
	t := time.NewTicker(period)
	defer t.Stop()
	var last *bool
	runs := 0
	for {
		if time.Since(w.started) >= delay {
			err := runProbe(ctx, w.probe, w.spec, w.podIP)
			if ctx.Err() != nil {
				return
			}
			ok := err == nil
			if last != nil && *last == ok {
				runs++
			} else {
				last, runs = &ok, 1
			}
			if !ok {
				w.onFail(err.Error())
			}
			if (ok && runs >= succ) || (!ok && runs >= fail) {
				msg := ""
				if err != nil {
					msg = err.Error()
				}
				w.onResult(ok, msg)
				if !ok && w.kind != readinessProbe {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
