// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package kubeenv_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// TestSchedulerBindsPodToReadyNode runs the real kube-scheduler: a pod without
// spec.nodeName is first reported Unschedulable (the Node every Env creates
// keeps its not-ready taint and has no room), then bound by the scheduler, as SchedulerUser, to the Ready Node the
// test registers, once the node-lifecycle controller has lifted the not-ready
// taint that admission puts on every new Node.
func TestSchedulerBindsPodToReadyNode(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithScheduler(), kubeenv.WithControllers("node-lifecycle-controller"))
	client := kubernetes.NewForConfigOrDie(env.RESTConfig())
	ctx := t.Context()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "scheduled"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:      "app",
			Image:     "example.invalid/app:v1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		}}},
	}
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, client, pod, "PodScheduled False with reason Unschedulable", func(p *corev1.Pod) bool {
		c := podCondition(p, corev1.PodScheduled)
		return p.Spec.NodeName == "" && c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
	})

	const node = "ready-node"
	registerReadyNode(t, client, node)
	bound := waitPod(t, client, pod, "bound to "+node, func(p *corev1.Pod) bool {
		c := podCondition(p, corev1.PodScheduled)
		return p.Spec.NodeName == node && c != nil && c.Status == corev1.ConditionTrue
	})
	if bound.Spec.NodeName != node {
		t.Fatalf("pod bound to %q, want %q", bound.Spec.NodeName, node)
	}
	waitAudit(t, env, "a pods/binding create by kube-scheduler", func(e kubeenv.AuditEvent) bool {
		return e.User == kubeenv.SchedulerUser && e.Verb == "create" && e.Resource == "pods" && e.Subresource == "binding" &&
			e.Namespace == pod.Namespace && e.Name == pod.Name && e.Code == 201
	})
}

// registerReadyNode creates a Node with room for pods and a Ready condition,
// as a kubelet registers itself.
func registerReadyNode(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	ctx := t.Context()
	_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{corev1.LabelHostname: name},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	room := corev1.ResourceList{
		corev1.ResourcePods:   resource.MustParse("110"),
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("4Gi"),
	}
	// The node-lifecycle controller writes the new Node too (its taints):
	// retry on conflict, as a kubelet's status updates do.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Capacity, n.Status.Allocatable = room, room
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		_, err = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitPod waits up to waitBound until ok holds for the pod, and returns it.
func waitPod(t *testing.T, client kubernetes.Interface, pod *corev1.Pod, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	began := time.Now()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, waitBound, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return ok(p), nil
	})
	if err != nil && last == nil {
		t.Fatalf("pod %s/%s: not %s: %v", pod.Namespace, pod.Name, what, err)
	}
	if err != nil {
		t.Fatalf("pod %s/%s: not %s after %v: spec.nodeName %q, conditions %+v", pod.Namespace, pod.Name, what, waitBound, last.Spec.NodeName, last.Status.Conditions)
	}
	t.Logf("pod %s/%s %s after %v", pod.Namespace, pod.Name, what, time.Since(began).Round(time.Millisecond))
	return last
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
