// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// startProbes starts the probe workers of one run. As in the kubelet, the
// liveness and readiness probes wait for a startup probe to succeed; a
// container without a readiness probe is ready once started.
func (c *container) startProbes(ctx context.Context, started time.Time) {
	if c.spec.StartupProbe == nil {
		c.startRunningProbes(ctx, started)
		return
	}
	w := c.worker(startupProbe, c.spec.StartupProbe, started)
	w.onResult = func(ok bool, msg string) {
		if !ok {
			c.killForProbe(startupProbe, msg)
			return
		}
		c.pod.mu.Lock()
		c.started = true
		c.pod.mu.Unlock()
		c.pod.notify()
		go c.startRunningProbes(ctx, started)
	}
	go w.run(ctx)
}

// startRunningProbes starts the liveness and readiness workers.
func (c *container) startRunningProbes(ctx context.Context, started time.Time) {
	if p := c.spec.LivenessProbe; p != nil {
		w := c.worker(livenessProbe, p, started)
		w.onResult = func(ok bool, msg string) {
			if !ok {
				c.killForProbe(livenessProbe, msg)
			}
		}
		go w.run(ctx)
	}
	if p := c.spec.ReadinessProbe; p != nil {
		w := c.worker(readinessProbe, p, started)
		w.onResult = func(ok bool, _ string) { c.setReady(ctx, ok) }
		go w.run(ctx)
		return
	}
	c.setReady(ctx, true)
}

func (c *container) worker(kind probeKind, p *corev1.Probe, started time.Time) probeWorker {
	c.pod.mu.Lock()
	ip := c.pod.addr.String()
	c.pod.mu.Unlock()
	return probeWorker{
		kind: kind, probe: p, spec: &c.spec, podIP: ip, started: started,
		onFail: func(msg string) {
			c.pod.event(corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", kind, msg)
		},
	}
}

// setReady records a readiness result, unless the run has ended (ctx done).
func (c *container) setReady(ctx context.Context, ok bool) {
	c.pod.mu.Lock()
	if ctx.Err() != nil || c.proc == nil || c.ready == ok {
		c.pod.mu.Unlock()
		return
	}
	c.ready = ok
	c.pod.mu.Unlock()
	c.pod.notify()
}

// killForProbe stops the run after a failed liveness or startup probe, with
// the probe's terminationGracePeriodSeconds or else the pod's.
func (c *container) killForProbe(kind probeKind, msg string) {
	c.pod.mu.Lock()
	proc := c.proc
	if proc == nil || c.pod.terminating {
		c.pod.mu.Unlock()
		return
	}
	c.probeKilled = true
	grace := c.pod.pod.Spec.TerminationGracePeriodSeconds
	if p := c.probeOf(kind); p != nil && p.TerminationGracePeriodSeconds != nil {
		grace = p.TerminationGracePeriodSeconds
	}
	c.pod.mu.Unlock()
	c.pod.event(corev1.EventTypeNormal, "Killing", "Container %s failed %s probe (%s), will be restarted", c.spec.Name, kind, msg)
	go proc.stop(gracePeriod(grace))
}

func (c *container) probeOf(kind probeKind) *corev1.Probe {
	if kind == startupProbe {
		return c.spec.StartupProbe
	}
	return c.spec.LivenessProbe
}

// gracePeriod converts seconds (nil: the API's default of 30) to a duration.
func gracePeriod(s *int64) time.Duration {
	if s == nil {
		return 30 * time.Second
	}
	return time.Duration(max(*s, 0)) * time.Second
}
