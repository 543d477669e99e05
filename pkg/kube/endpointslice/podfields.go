// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodFields returns a new Pod holding only the fields of pod that ForService
// and Collection read: name, namespace, uid, resourceVersion, generation,
// creation and deletion timestamps, labels; spec.nodeName, hostname,
// subdomain, and each container's and init container's name, restartPolicy
// and ports; status.phase, podIP, podIPs and each condition's type and status.
// Everything else (annotations, managedFields, volumes, env, images, ...) is
// left out, which is most of a real Pod. File mode stores Pods so reduced;
// for every Service, ForService(svc, pods) equals ForService(svc, PodFields of
// pods). The result shares pod's label map and strings; pod is not modified.
func PodFields(pod *corev1.Pod) *corev1.Pod {
	var conditions []corev1.PodCondition
	if n := len(pod.Status.Conditions); n > 0 {
		conditions = make([]corev1.PodCondition, n)
		for i, c := range pod.Status.Conditions {
			conditions[i] = corev1.PodCondition{Type: c.Type, Status: c.Status}
		}
	}
	out := reducedPod(pod, containerPorts(pod.Spec.Containers), containerPorts(pod.Spec.InitContainers), conditions)
	return &out
}

// reducedPod is PodFields' Pod of pod, with the given containers, init
// containers and conditions (already reduced).
func reducedPod(pod *corev1.Pod, containers, initContainers []corev1.Container, conditions []corev1.PodCondition) corev1.Pod {
	return corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, Generation: pod.Generation,
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
			Labels: pod.Labels,
		},
		Spec: corev1.PodSpec{
			NodeName: pod.Spec.NodeName, Hostname: pod.Spec.Hostname, Subdomain: pod.Spec.Subdomain,
			Containers: containers, InitContainers: initContainers,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs, Conditions: conditions},
	}
}

// portsOnly is c with only the fields PodFields keeps.
func portsOnly(c *corev1.Container) corev1.Container {
	return corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy, Ports: c.Ports}
}

func containerPorts(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = portsOnly(&cs[i])
	}
	return out
}

// ReducePodFields reduces pod in place to what PodFields returns: afterwards
// pod equals PodFields of the pod it was, its containers and conditions
// trimmed in their own slices. For a caller that holds the only reference
// to a freshly decoded Pod (file mode, a hundred thousand of them), this
// spares a second Pod and container slice per Pod, and keeps the decoded
// ones from becoming garbage amid the Pods that stay.
func ReducePodFields(pod *corev1.Pod) {
	containers := reduceContainers(pod.Spec.Containers)
	initContainers := reduceContainers(pod.Spec.InitContainers)
	conditions := pod.Status.Conditions
	if len(conditions) == 0 {
		conditions = nil
	}
	for i, c := range conditions {
		conditions[i] = corev1.PodCondition{Type: c.Type, Status: c.Status}
	}
	*pod = reducedPod(pod, containers, initContainers, conditions)
}

func reduceContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	for i := range cs {
		cs[i] = portsOnly(&cs[i])
	}
	return cs
}
