// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// NodeName is the Node every Env creates, and the one MarkPodReady binds pods to.
const NodeName = "kubeenv-node"

// KubeletFieldManager is the field manager of the writes that the kubelet
// stand-in (MarkPodReady, SetPodReady) and Start's Node creation make, as the
// audit log shows them.
const KubeletFieldManager = "kubeenv-kubelet"

// MarkPodReady plays the kubelet for a pod: see SetPodReady with ready true.
func MarkPodReady(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, ip string) (*corev1.Pod, error) {
	return SetPodReady(ctx, client, pod, ip, true)
}

// SetPodReady plays the kubelet for the pod with pod's namespace and name: it
// binds the pod to NodeName if it has no spec.nodeName yet (binding
// subresource), then writes status.podIP, status.podIPs, phase Running and the
// Ready and ContainersReady conditions (status ready) through the status
// subresource, retrying on conflict. Only the namespace and name of pod are
// read. It returns the pod as written.
//
// ip must be a valid address that is neither loopback nor unspecified: the
// EndpointSlice controller's writes of such addresses are rejected, which
// would silently keep the pod out of every slice. Errors from the API are
// wrapped.
func SetPodReady(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, ip string, ready bool) (*corev1.Pod, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, fmt.Errorf("kubeenv: pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if addr.IsLoopback() || addr.IsUnspecified() {
		return nil, fmt.Errorf("kubeenv: pod %s/%s: address %s is loopback or unspecified, which EndpointSlices reject; use data such as 10.244.0.x", pod.Namespace, pod.Name, addr)
	}
	pods := client.CoreV1().Pods(pod.Namespace)
	live, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubeenv: get pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if live.Spec.NodeName == "" {
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: live.Namespace, Name: live.Name, UID: live.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: NodeName},
		}
		if err := pods.Bind(ctx, binding, metav1.CreateOptions{FieldManager: KubeletFieldManager}); err != nil {
			return nil, fmt.Errorf("kubeenv: bind pod %s/%s to %s: %w", pod.Namespace, pod.Name, NodeName, err)
		}
	}
	var out *corev1.Pod
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		live.Status = runningStatus(live.Status, addr, ready, metav1.NewTime(time.Now()))
		out, err = pods.UpdateStatus(ctx, live, metav1.UpdateOptions{FieldManager: KubeletFieldManager})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kubeenv: update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return out, nil
}

// runningStatus returns s as a kubelet would report a running pod at addr:
// phase Running, the pod IPs, and the Initialized, PodScheduled (true),
// ContainersReady and Ready (ready) conditions. A condition's
// lastTransitionTime changes only when its status does.
func runningStatus(s corev1.PodStatus, addr netip.Addr, ready bool, now metav1.Time) corev1.PodStatus {
	s = *s.DeepCopy()
	s.Phase = corev1.PodRunning
	s.PodIP = addr.String()
	s.PodIPs = []corev1.PodIP{{IP: addr.String()}}
	if s.StartTime == nil {
		s.StartTime = &now
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	for _, c := range []struct {
		typ    corev1.PodConditionType
		status corev1.ConditionStatus
	}{
		{corev1.PodInitialized, corev1.ConditionTrue},
		{corev1.PodScheduled, corev1.ConditionTrue},
		{corev1.ContainersReady, status},
		{corev1.PodReady, status},
	} {
		s.Conditions = setCondition(s.Conditions, c.typ, c.status, now)
	}
	return s
}

// setCondition sets the status of the condition typ in conds, adding it if
// absent, and keeps its lastTransitionTime when the status is unchanged.
func setCondition(conds []corev1.PodCondition, typ corev1.PodConditionType, status corev1.ConditionStatus, now metav1.Time) []corev1.PodCondition {
	for i := range conds {
		if conds[i].Type != typ {
			continue
		}
		if conds[i].Status != status {
			conds[i].Status = status
			conds[i].LastTransitionTime = now
		}
		return conds
	}
	return append(conds, corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: now})
}

// CreateReadyPods creates one pod per address in namespace, named
// "<prefix>-<i>", labelled with labels, with one container port (named http)
// and an image that is never pulled, and plays the kubelet for each
// (MarkPodReady with that address). It returns the pods as written, in the
// order of ips; the first error stops it and is returned wrapped.
func CreateReadyPods(ctx context.Context, client kubernetes.Interface, namespace, prefix string,
	labels map[string]string, port int32, ips ...string,
) ([]*corev1.Pod, error) {
	pods := make([]*corev1.Pod, 0, len(ips))
	for i, ip := range ips {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s-%d", prefix, i), Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: prefix, Image: "example.invalid/" + prefix + ":never-pulled",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}},
			}}},
		}
		pod, err := client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return pods, fmt.Errorf("kubeenv: create pod %s/%s: %w", namespace, pod.Name, err)
		}
		if pod, err = MarkPodReady(ctx, client, pod, ip); err != nil {
			return pods, err
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// CreateBoundReadyPod creates pod already bound to NodeName (spec.nodeName
// set at creation, as for a pod the scheduler has placed), then plays the
// kubelet once: status.podIP, phase Running and Ready written through the
// status subresource on the created version, so a pod costs two requests
// (CreateReadyPods makes five). For loading thousands of pods; ip is
// checked as in SetPodReady. pod is not modified; the pod as written is
// returned.
func CreateBoundReadyPod(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, ip string) (*corev1.Pod, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil || addr.IsLoopback() || addr.IsUnspecified() {
		return nil, fmt.Errorf("kubeenv: pod %s/%s: address %q must be valid, neither loopback nor unspecified", pod.Namespace, pod.Name, ip)
	}
	pod = pod.DeepCopy()
	pod.Spec.NodeName = NodeName
	pods := client.CoreV1().Pods(pod.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubeenv: create pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	created.Status = runningStatus(created.Status, addr, true, metav1.NewTime(time.Now()))
	out, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: KubeletFieldManager})
	if err != nil {
		return nil, fmt.Errorf("kubeenv: update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return out, nil
}
