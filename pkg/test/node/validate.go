// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// unsupported lists the parts of pod this node cannot run faithfully. A pod
// with any of them is not started: its containers wait with reason
// CreateContainerConfigError and a Warning event names what is missing,
// rather than the node running something other than what the pod asks for.
func unsupported(pod *corev1.Pod) []string {
	var out []string
	if len(pod.Spec.InitContainers) > 0 {
		out = append(out, "initContainers")
	}
	if len(pod.Spec.ReadinessGates) > 0 {
		out = append(out, "readinessGates")
	}
	if pod.Spec.HostNetwork {
		out = append(out, "hostNetwork")
	}
	for i := range pod.Spec.Containers {
		out = append(out, unsupportedInContainer(pod, &pod.Spec.Containers[i])...)
	}
	return out
}

func unsupportedInContainer(pod *corev1.Pod, c *corev1.Container) []string {
	var out []string
	at := func(what string) { out = append(out, fmt.Sprintf("container %s: %s", c.Name, what)) }
	for _, m := range c.VolumeMounts {
		switch v := podVolume(pod, m.Name); {
		case v == nil || !supportedVolume(v):
			at("volumeMount " + m.Name + " (this node mounts configMap, secret, projected and emptyDir volumes)")
		case m.SubPath != "" || m.SubPathExpr != "":
			at("volumeMount " + m.Name + " with subPath")
		}
	}
	if len(c.VolumeDevices) > 0 {
		at("volumeDevices")
	}
	if c.WorkingDir != "" {
		at("workingDir")
	}
	if c.Lifecycle != nil {
		at("lifecycle hooks")
	}
	probes := []struct {
		kind  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}}
	for _, p := range probes {
		if p.probe != nil && p.probe.HTTPGet == nil && p.probe.TCPSocket == nil && p.probe.GRPC == nil {
			at(p.kind + " with an exec handler")
		}
	}
	return out
}

// podVolume returns the pod's volume named name, or nil.
func podVolume(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}
