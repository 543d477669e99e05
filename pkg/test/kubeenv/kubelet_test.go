// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestRunningStatusKeepsTransitionTimes(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	addr := netip.MustParseAddr("10.244.0.13")

	ready := runningStatus(corev1.PodStatus{Phase: corev1.PodPending}, addr, true, t0)
	notReady := runningStatus(ready, addr, false, t1)

	if notReady.Phase != corev1.PodRunning || notReady.PodIP != "10.244.0.13" ||
		!cmp.Equal(notReady.PodIPs, []corev1.PodIP{{IP: "10.244.0.13"}}) {
		t.Fatalf("status = %+v, want Running at 10.244.0.13", notReady)
	}
	want := map[corev1.PodConditionType]corev1.PodCondition{
		corev1.PodInitialized:  {Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t0},
		corev1.PodScheduled:    {Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0},
		corev1.ContainersReady: {Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: t1},
		corev1.PodReady:        {Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: t1},
	}
	got := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range notReady.Conditions {
		got[c.Type] = c
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if ready.Conditions[3].Status != corev1.ConditionTrue {
		t.Errorf("runningStatus changed its input: %+v", ready.Conditions)
	}
}

func TestSetPodReadyRejectsLoopback(t *testing.T) {
	client := fake.NewClientset()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	for _, ip := range []string{"127.0.0.1", "::1", "0.0.0.0", "not-an-ip"} {
		if _, err := SetPodReady(context.Background(), client, pod, ip, true); err == nil {
			t.Errorf("SetPodReady accepted %q", ip)
		}
	}
}

func TestCreateBoundReadyPod(t *testing.T) {
	client := fake.NewClientset()
	in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	out, err := CreateBoundReadyPod(context.Background(), client, in, "10.244.0.7")
	if err != nil {
		t.Fatal(err)
	}
	if in.Spec.NodeName != "" {
		t.Errorf("CreateBoundReadyPod changed its input: nodeName %q", in.Spec.NodeName)
	}
	live, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{out, live} {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if p.Spec.NodeName != NodeName || p.Status.Phase != corev1.PodRunning || p.Status.PodIP != "10.244.0.7" || !ready {
			t.Errorf("pod = node %q, phase %q, IP %q, ready %v; want %s, Running, 10.244.0.7, ready",
				p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, ready, NodeName)
		}
	}
	for _, ip := range []string{"127.0.0.1", "0.0.0.0", "x"} {
		if _, err := CreateBoundReadyPod(context.Background(), client, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: ip}}, ip); err == nil {
			t.Errorf("CreateBoundReadyPod accepted %q", ip)
		}
	}
}
