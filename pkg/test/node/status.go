// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// kubeletConditions are the pod conditions the kubelet owns and writes.
var kubeletConditions = []corev1.PodConditionType{
	corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled,
}

// statusLocked builds the pod's status as the kubelet's generateAPIPodStatus
// does; mu held. Conditions the kubelet does not own are kept as the pod
// had them; qosClass is the apiserver's.
func (p *podRuntime) statusLocked() corev1.PodStatus {
	s := corev1.PodStatus{
		QOSClass:           p.pod.Status.QOSClass,
		ObservedGeneration: p.pod.Generation,
		HostIP:             p.node.hostIP(),
		HostIPs:            []corev1.HostIP{{IP: p.node.hostIP()}},
		StartTime:          &p.startTime,
	}
	if !p.terminated {
		s.PodIP = p.addr.String()
		s.PodIPs = []corev1.PodIP{{IP: s.PodIP}}
	}
	allReady := true
	for _, c := range p.containers {
		cs := c.statusLocked(p.terminated)
		allReady = allReady && cs.Ready
		s.ContainerStatuses = append(s.ContainerStatuses, cs)
	}
	s.Phase = p.phaseLocked(s.ContainerStatuses)
	s.Conditions = p.conditionsLocked(allReady && s.Phase == corev1.PodRunning)
	return s
}

// statusLocked is one container's status; a container that never ran when
// the pod is gone is reported as the kubelet reports it then.
func (c *container) statusLocked(podGone bool) corev1.ContainerStatus {
	state := c.state
	if podGone && state.Terminated == nil {
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "ContainerStatusUnknown",
			Message: "The container could not be located when the pod was terminated",
		}}
	}
	cs := corev1.ContainerStatus{
		Name:                 c.spec.Name,
		Image:                c.spec.Image,
		ImageID:              c.imageID,
		State:                state,
		LastTerminationState: c.last,
		Ready:                c.ready && state.Running != nil,
		RestartCount:         c.restarts,
		Started:              ptr.To(c.started && state.Running != nil),
	}
	if state.Running != nil || state.Terminated != nil {
		cs.ContainerID = c.containerID()
	}
	return cs
}

// phaseLocked is the kubelet's getPhase for a pod without init containers:
// Pending while a container has never run, Running while one runs or will
// be restarted, else Succeeded or Failed by exit codes. Once the pod is
// being deleted no container restarts, so it ends Succeeded or Failed.
func (p *podRuntime) phaseLocked(statuses []corev1.ContainerStatus) corev1.PodPhase {
	var waiting, running, stopped, succeeded int
	for _, cs := range statuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.LastTerminationState.Terminated != nil:
			stopped++
		default:
			waiting++
		}
	}
	policy := p.pod.Spec.RestartPolicy
	if p.terminated {
		policy = corev1.RestartPolicyNever
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case policy == corev1.RestartPolicyAlways:
		return corev1.PodRunning
	case stopped == succeeded:
		return corev1.PodSucceeded
	case policy == corev1.RestartPolicyNever:
		return corev1.PodFailed
	default:
		return corev1.PodRunning
	}
}

// conditionsLocked returns the kubelet's conditions, then the pod's others.
func (p *podRuntime) conditionsLocked(ready bool) []corev1.PodCondition {
	want := map[corev1.PodConditionType]bool{
		corev1.PodReadyToStartContainers: !p.terminated,
		corev1.PodInitialized:            true,
		corev1.ContainersReady:           ready,
		corev1.PodReady:                  ready,
		corev1.PodScheduled:              true,
	}
	var out []corev1.PodCondition
	for _, t := range kubeletConditions {
		out = append(out, p.conds.condition(t, want[t], p.pod.Generation))
	}
	for _, c := range p.pod.Status.Conditions {
		if _, ours := want[c.Type]; !ours {
			out = append(out, c)
		}
	}
	return out
}

// conditionClock remembers when each condition last changed.
type conditionClock struct {
	status map[corev1.PodConditionType]corev1.ConditionStatus
	since  map[corev1.PodConditionType]metav1.Time
}

func newConditionClock() *conditionClock {
	return &conditionClock{status: map[corev1.PodConditionType]corev1.ConditionStatus{}, since: map[corev1.PodConditionType]metav1.Time{}}
}

func (k *conditionClock) condition(t corev1.PodConditionType, ok bool, gen int64) corev1.PodCondition {
	st := corev1.ConditionFalse
	if ok {
		st = corev1.ConditionTrue
	}
	if prev, seen := k.status[t]; !seen || prev != st {
		k.status[t], k.since[t] = st, metav1.Now()
	}
	c := corev1.PodCondition{Type: t, Status: st, LastTransitionTime: k.since[t], ObservedGeneration: gen}
	if !ok && (t == corev1.PodReady || t == corev1.ContainersReady) {
		c.Reason = "ContainersNotReady"
	}
	return c
}
