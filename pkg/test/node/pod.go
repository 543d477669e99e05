// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podRuntime is one pod on this node: its sandbox and its containers. mu
// guards everything below it.
type podRuntime struct {
	node   *provider
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup  // the containers' supervisors
	kick   chan struct{}   // wakes the status notifier
	done   chan struct{}   // closed once terminated and reported
	conds  *conditionClock // transition times of the pod conditions

	mu          sync.Mutex
	pod         *corev1.Pod // the latest spec and metadata
	sb          *sandbox
	addr        netip.Addr
	dir         string // the pod's folder: kubeconfig, working directory
	kubeconfig  string
	volumes     map[string]string // volume name → its folder (volumes.go)
	resolvConf  string            // the pod's resolv.conf; "" keeps the host's (resolvconf.go)
	startTime   metav1.Time
	containers  []*container
	terminating bool
	terminated  bool
}

// start brings the pod up in the background: credentials, then every
// container. A pod this node cannot run faithfully has its containers wait
// with CreateContainerConfigError instead.
func (p *podRuntime) start() {
	go p.notifier()
	if problems := unsupported(p.pod); len(problems) > 0 {
		msg := "this node cannot run " + strings.Join(problems, "; ")
		p.event(corev1.EventTypeWarning, "Failed", "Error: %s", msg)
		p.mu.Lock()
		for _, c := range p.containers {
			c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: msg}}
		}
		p.mu.Unlock()
		p.notify()
		return
	}
	p.wg.Add(len(p.containers))
	go func() {
		kubeconfig, err := p.node.credentials(p.ctx, p.pod, p.dir)
		if err != nil {
			p.event(corev1.EventTypeWarning, "FailedMount", "API credentials: %v", err)
		}
		var volumes map[string]string
		if err == nil {
			volumes, err = p.writeVolumesRetrying()
		}
		var resolvConf string
		if err == nil {
			if resolvConf, err = p.node.writeResolvConf(p, p.pod, p.dir); err != nil {
				p.event(corev1.EventTypeWarning, "FailedCreatePodSandBox", "resolv.conf: %v", err)
			}
		}
		p.mu.Lock()
		p.kubeconfig, p.volumes, p.resolvConf = kubeconfig, volumes, resolvConf
		p.mu.Unlock()
		for _, c := range p.containers {
			go func() {
				defer p.wg.Done()
				if err != nil {
					c.waitWithError(p.ctx, err)
					return
				}
				c.supervise(p.ctx)
			}()
		}
	}()
}

// writeVolumesRetrying writes the pod's volumes, and while that fails
// (a ConfigMap or Secret they name does not exist yet, or lacks a key)
// retries with a back-off from 0.5 s doubling to 8 s, as the kubelet's
// volume manager keeps retrying a mount: the pod's containers wait
// meanwhile, with a FailedMount event for each new error. The Gateway
// API suite creates the Secrets its base pods mount only after those
// pods. It fails only when the pod is stopped.
func (p *podRuntime) writeVolumesRetrying() (map[string]string, error) {
	delay, last := 500*time.Millisecond, ""
	for {
		volumes, err := p.node.writeVolumes(p.ctx, p.pod, p.dir)
		if err == nil {
			return volumes, nil
		}
		if err.Error() != last {
			last = err.Error()
			p.event(corev1.EventTypeWarning, "FailedMount", "%v", err)
		}
		select {
		case <-p.ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay = min(2*delay, 8*time.Second)
	}
}

// terminate stops every container (SIGTERM, then SIGKILL after grace),
// removes the sandbox and reports the final status. Safe to call again.
func (p *podRuntime) terminate(grace time.Duration) {
	p.mu.Lock()
	if p.terminating {
		if grace == 0 { // a second, immediate kill (node shutdown)
			for _, c := range p.containers {
				if c.proc != nil {
					c.proc.kill()
				}
			}
		}
		p.mu.Unlock()
		return
	}
	p.terminating = true
	var procs []*process
	for _, c := range p.containers {
		if c.proc != nil {
			procs = append(procs, c.proc)
			p.eventLocked(corev1.EventTypeNormal, "Killing", "Stopping container %s", c.spec.Name)
		}
	}
	p.mu.Unlock()
	p.cancel()
	var stops sync.WaitGroup
	for _, proc := range procs {
		stops.Add(1)
		go func() { defer stops.Done(); proc.stop(grace) }()
	}
	stops.Wait()
	p.wg.Wait()
	if err := p.sb.delete(); err != nil {
		p.event(corev1.EventTypeWarning, "FailedKillPod", "remove pod network: %v", err)
	}
	p.node.ipam.release(p.addr)
	p.mu.Lock()
	p.terminated = true
	p.mu.Unlock()
	p.notify()
}

// notify asks the notifier to report the current status.
func (p *podRuntime) notify() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// notifier reports the latest status to virtual-kubelet each time it is
// kicked, one report at a time, so an older status never overwrites a newer
// one. It ends after reporting the terminated pod.
func (p *podRuntime) notifier() {
	defer close(p.done)
	for range p.kick {
		pod := p.snapshot()
		p.node.report(pod)
		p.mu.Lock()
		final := p.terminated
		p.mu.Unlock()
		if final {
			return
		}
	}
}

// snapshot returns a copy of the pod with its current status.
func (p *podRuntime) snapshot() *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod := p.pod.DeepCopy()
	pod.Status = p.statusLocked()
	return pod
}

// runtimeFields returns the downward API's runtime values; mu held.
func (p *podRuntime) runtimeFields() runtimeFields {
	return runtimeFields{podIP: p.addr.String(), hostIP: p.node.hostIP()}
}

// event records an event on the pod, as the kubelet does.
func (p *podRuntime) event(kind, reason, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.eventLocked(kind, reason, format, args...)
}

func (p *podRuntime) eventLocked(kind, reason, format string, args ...any) {
	p.node.recorder.Event(p.pod, kind, reason, fmt.Sprintf(format, args...))
}
