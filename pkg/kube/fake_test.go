// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestNewFakeRoutesObjects(t *testing.T) {
	c := NewFake(
		pod("llm", "a"),
		&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "route"}},
		// "Gateway" is a kind whose resource client-go's fakes guess wrong.
		&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "inference-gateway"}},
		pool("llm", "vllm-llama3-8b"),
		parseUnstructured(t, seedDestinationRule),
	)
	ctx := context.Background()
	if _, err := c.Kube().CoreV1().Pods("llm").Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("pod: %v", err)
	}
	if _, err := c.GatewayAPI().GatewayV1().HTTPRoutes("llm").Get(ctx, "route", metav1.GetOptions{}); err != nil {
		t.Errorf("HTTPRoute: %v", err)
	}
	if _, err := c.GatewayAPI().GatewayV1().Gateways("gw").Get(ctx, "inference-gateway", metav1.GetOptions{}); err != nil {
		t.Errorf("Gateway: %v", err)
	}
	if _, err := c.Inference().InferenceV1().InferencePools("llm").Get(ctx, "vllm-llama3-8b", metav1.GetOptions{}); err != nil {
		t.Errorf("InferencePool: %v", err)
	}
	if _, err := c.Dynamic().Resource(DestinationRuleGVR).Namespace("llm-namespace").Get(ctx, "vllm-llama3-8b-epp-tls", metav1.GetOptions{}); err != nil {
		t.Errorf("DestinationRule: %v", err)
	}
}

type unknownObject struct{ metav1.TypeMeta }

func (u *unknownObject) DeepCopyObject() runtime.Object { return &unknownObject{u.TypeMeta} }

func TestNewFakePanicsOnUnknownType(t *testing.T) {
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, "*kube.unknownObject") {
			t.Errorf("panic %v, want one naming the type", r)
		}
	}()
	NewFake(&unknownObject{})
}
