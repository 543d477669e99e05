// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// defaultPath is the PATH a container runtime sets when the image has none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// container is one container of a running pod. Its fields after spec are
// guarded by the pod's mutex.
type container struct {
	pod  *podRuntime
	spec corev1.Container

	state, last corev1.ContainerState
	// lastRun is the run whose end last holds (its restart count), for
	// `kubectl logs --previous`.
	lastRun     int32
	restarts    int32
	ready       bool
	started     bool
	imageID     string
	proc        *process
	probeKilled bool // this run was killed by a failed liveness or startup probe
}

// supervise runs the container until the pod terminates or the restart
// policy says stop: start, wait, restart after a back-off. It is the
// kubelet's SyncPod for one container, with the container runtime inside.
func (c *container) supervise(ctx context.Context) {
	failures := 0
	for {
		ran, ok := c.runOnce(ctx)
		if !ok || !c.shouldRestart() {
			return
		}
		if ran >= 2*c.pod.node.cfg.MaxBackOff {
			failures = 0 // the kubelet forgets a back-off after 2x its cap
		}
		c.pod.mu.Lock()
		c.last, c.lastRun = c.state, c.restarts // the run that just ended
		c.pod.mu.Unlock()
		if d := c.pod.node.cfg.backOff(failures); d > 0 && !c.backOff(ctx, d) {
			return
		}
		failures++
		c.pod.mu.Lock()
		c.restarts++
		c.pod.mu.Unlock()
	}
}

// runOnce prepares and runs the container once and returns how long it ran;
// ok is false when the pod is terminating or the container cannot be
// started (its waiting state then says why).
func (c *container) runOnce(ctx context.Context) (time.Duration, bool) {
	argv, env, mounts, err := c.prepare()
	if err != nil {
		c.waitWithError(ctx, err)
		return 0, false
	}
	logPath := c.pod.node.logPath(c.pod.pod, c.spec.Name, c.restarts)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		c.waitWithError(ctx, err)
		return 0, false
	}
	c.pod.mu.Lock()
	if c.pod.terminating {
		c.pod.mu.Unlock()
		return 0, false
	}
	proc, err := startProcess(c.pod.sb, argv, env, mounts, c.pod.dir, logPath)
	if err != nil {
		c.pod.mu.Unlock()
		c.waitWithError(ctx, fmt.Errorf("%w: %w", errStart, err))
		return 0, false
	}
	c.proc, c.probeKilled, c.ready = proc, false, false
	c.started = c.spec.StartupProbe == nil
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(proc.started)}}
	c.pod.mu.Unlock()
	c.pod.event(corev1.EventTypeNormal, "Started", "Started container %s", c.spec.Name)
	c.pod.notify()

	probeCtx, stopProbes := context.WithCancel(ctx)
	c.startProbes(probeCtx, proc.started)
	<-proc.done
	stopProbes()
	c.finish(proc)
	return time.Since(proc.started), true
}

// errStart marks a process that could not be started.
var errStart = errors.New("failed to start container process")

// finish records the run's end.
func (c *container) finish(p *process) {
	c.pod.mu.Lock()
	reason := "Completed"
	if p.exit != 0 {
		reason = "Error"
	}
	c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode:    int32(p.exit),
		Reason:      reason,
		StartedAt:   metav1.NewTime(p.started),
		FinishedAt:  metav1.Now(),
		ContainerID: c.containerID(),
	}}
	c.proc, c.ready = nil, false
	c.pod.mu.Unlock()
	c.pod.notify()
}

// shouldRestart applies the pod's restartPolicy to the run that just ended,
// as the kubelet's ShouldContainerBeRestarted does; a run killed by its
// liveness or startup probe restarts under every policy but Never.
func (c *container) shouldRestart() bool {
	c.pod.mu.Lock()
	defer c.pod.mu.Unlock()
	if c.pod.terminating {
		return false
	}
	switch c.pod.pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return c.probeKilled || c.state.Terminated.ExitCode != 0
	default:
		return true
	}
}

// backOff waits d in state CrashLoopBackOff; false if the pod terminated.
func (c *container) backOff(ctx context.Context, d time.Duration) bool {
	msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", d, c.spec.Name, c.pod.pod.Name, c.pod.pod.Namespace, c.pod.pod.UID)
	c.pod.mu.Lock()
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: msg}}
	c.pod.mu.Unlock()
	c.pod.event(corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s", c.spec.Name)
	c.pod.notify()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		c.pod.mu.Lock()
		defer c.pod.mu.Unlock()
		return !c.pod.terminating
	}
}

// waitWithError leaves the container waiting with the reason the kubelet
// gives err, records a Warning event, and blocks until the pod terminates:
// nothing this node could retry would change the outcome (the image map and
// the pod's spec are fixed).
func (c *container) waitWithError(ctx context.Context, err error) {
	reason := "CreateContainerConfigError"
	var unknown errImageNotKnown
	switch {
	case errors.As(err, &unknown):
		reason = "ErrImagePull"
		c.pod.event(corev1.EventTypeWarning, reason, "Failed to pull image %q: %v", c.spec.Image, err)
	case errors.Is(err, errStart):
		reason = "RunContainerError"
		c.pod.event(corev1.EventTypeWarning, "Failed", "Error: %v", err)
	default:
		c.pod.event(corev1.EventTypeWarning, "Failed", "Error: %v", err)
	}
	c.pod.mu.Lock()
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}}
	c.pod.mu.Unlock()
	c.pod.notify()
	<-ctx.Done()
}

// prepare resolves the image, environment, command line and mounts.
func (c *container) prepare() (argv, env []string, mounts []bindMount, err error) {
	p := c.pod
	p.mu.Lock()
	pod, rt, kubeconfig, volumes, resolvConf := p.pod, p.runtimeFields(), p.kubeconfig, p.volumes, p.resolvConf
	p.mu.Unlock()
	img, err := lookupImage(p.node.cfg.Images, c.spec.Image)
	if err != nil {
		return nil, nil, nil, err
	}
	vars, err := p.node.env.containerEnv(pod, &c.spec, rt)
	if err != nil {
		return nil, nil, nil, err
	}
	lookup := lookupIn(vars)
	argv, err = img.argv(&c.spec, expandAll(c.spec.Command, lookup), expandAll(c.spec.Args, lookup))
	if err != nil {
		return nil, nil, nil, err
	}
	if mounts, err = containerMounts(&c.spec, volumes); err != nil {
		return nil, nil, nil, err
	}
	if resolvConf != "" {
		mounts = append(mounts, bindMount{Src: resolvConf, Dst: resolvConfPath, File: true})
	}
	env = processEnv(img, pod, kubeconfig, vars)
	p.mu.Lock()
	c.imageID = "binary://" + img.Binary
	p.mu.Unlock()
	return argv, env, mounts, nil
}

// processEnv is the process's environment: the image's ENV (with a default
// PATH), HOSTNAME, KUBECONFIG when the pod has API credentials, then the
// container's variables, later ones winning.
func processEnv(img Image, pod *corev1.Pod, kubeconfig string, vars map[string]string) []string {
	env := []string{defaultPath}
	env = append(env, img.Env...)
	env = append(env, "HOSTNAME="+pod.Name)
	if kubeconfig != "" {
		env = append(env, "KUBECONFIG="+kubeconfig)
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env // exec keeps the last value of a repeated name
}

// containerID names this run, as a runtime's ID would.
func (c *container) containerID() string {
	return "process://" + string(c.pod.pod.UID) + "/" + c.spec.Name + "/" + strconv.Itoa(int(c.restarts))
}
