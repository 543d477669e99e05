// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, ManagedFields: someManagedFields,
	}}
}

func TestPodsFlowIntoCollection(t *testing.T) {
	c := NewFake(pod("llm", "a"))
	pods := c.Pods()
	startFake(t, c)
	synced(t, "Pods", pods)

	a := pods.GetKey("llm/a")
	if a == nil {
		t.Fatalf("initial pod missing; have %d pods", len(pods.List()))
	}
	if (*a).ManagedFields != nil {
		t.Errorf("managedFields not stripped: %v", (*a).ManagedFields)
	}

	ctx := context.Background()
	if _, err := c.Kube().CoreV1().Pods("llm").Create(ctx, pod("llm", "b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod b", func() bool { return pods.GetKey("llm/b") != nil })
	if b := pods.GetKey("llm/b"); (*b).ManagedFields != nil {
		t.Errorf("managedFields of a created pod not stripped: %v", (*b).ManagedFields)
	}

	if err := c.Kube().CoreV1().Pods("llm").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod a deleted", func() bool { return pods.GetKey("llm/a") == nil })
}

func TestConfigMapsFlowIntoCollection(t *testing.T) {
	ca := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "epp-ca", ManagedFields: someManagedFields},
		Data:       map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----"},
	}
	c := NewFake(ca)
	configMaps := c.ConfigMaps()
	if again := c.ConfigMaps(); again != configMaps {
		t.Error("ConfigMaps built twice")
	}
	startFake(t, c)
	synced(t, "ConfigMaps", configMaps)

	got := configMaps.GetKey("llm/epp-ca")
	if got == nil {
		t.Fatalf("initial ConfigMap missing; have %d", len(configMaps.List()))
	}
	if (*got).Data["ca.crt"] != "-----BEGIN CERTIFICATE-----" || (*got).ManagedFields != nil {
		t.Errorf("ConfigMap = data %v, managedFields %v", (*got).Data, (*got).ManagedFields)
	}

	ctx := context.Background()
	updated := ca.DeepCopy()
	updated.Data["ca.crt"] = "rotated"
	if _, err := c.Kube().CoreV1().ConfigMaps("llm").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ConfigMap updated", func() bool {
		cm := configMaps.GetKey("llm/epp-ca")
		return cm != nil && (*cm).Data["ca.crt"] == "rotated"
	})
	if err := c.Kube().CoreV1().ConfigMaps("llm").Delete(ctx, "epp-ca", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ConfigMap deleted", func() bool { return configMaps.GetKey("llm/epp-ca") == nil })
}

func TestCollectionsAreMemoized(t *testing.T) {
	c := NewFake()
	if a, b := c.Pods(), c.Pods(); a != b {
		t.Error("Pods built twice")
	}
	if a, b := c.InferencePools(), c.InferencePools(); a != b {
		t.Error("InferencePools built twice")
	}
	if a, b := c.DestinationRules(), c.DestinationRules(); a != b {
		t.Error("DestinationRules built twice")
	}
	c.Shutdown()
}

// A collection asked for after Start starts its informer at once.
func TestCollectionAfterStart(t *testing.T) {
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "inference-gateway"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "vllm-llama3-8b-epp"}}
	c := NewFake(gw, svc)
	startFake(t, c)

	gateways, services := c.Gateways(), c.Services()
	synced(t, "Gateways", gateways)
	synced(t, "Services", services)
	if gateways.GetKey("gw/inference-gateway") == nil || services.GetKey("llm/vllm-llama3-8b-epp") == nil {
		t.Errorf("gateways %d, services %d", len(gateways.List()), len(services.List()))
	}
}

func TestWaitForCacheSync(t *testing.T) {
	c := NewFake(pod("llm", "a"))
	pods, pools := c.Pods(), c.InferencePools() // pools: CRD absent
	startFake(t, c)
	stop := make(chan struct{})
	defer close(stop)
	if !c.WaitForCacheSync(stop) {
		t.Fatal("WaitForCacheSync returned false")
	}
	synced(t, "Pods", pods)
	if !pools.HasSynced() {
		t.Error("InferencePools not synced after WaitForCacheSync")
	}
}

func TestDebugHandler(t *testing.T) {
	h := krt.NewDebugHandler()
	c := newFake([]Option{WithDebugging(h)})
	pods, pools := c.Pods(), c.InferencePools()
	stop := make(chan struct{})
	c.Start(stop)
	synced(t, "Pods", pods)
	synced(t, "InferencePools", pools)
	var names []string
	for _, d := range h.Dump() {
		names = append(names, d.Name)
	}
	if want := []string{"InferencePools", "Pods"}; !slices.Equal(names, want) {
		t.Errorf("debug handler has %v, want %v", names, want)
	}

	close(stop) // ends the Client: its collections leave the handler
	c.Shutdown()
	waitFor(t, "collections released", func() bool { return len(h.Dump()) == 0 })
}
