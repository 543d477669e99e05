// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package ownedstatus checks apply.OwnedStatus against a real API server: the
// status of a Gateway (which only we write) is server-side applied on the
// status subresource, and an unchanged status causes no request.
package ownedstatus

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pkg/kube/apply"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

const manager = "istio.io/gateway-controller"

func gatewayStatus(reason string) *gwv1ac.GatewayApplyConfiguration {
	return gwv1ac.Gateway("gateway", "gateway-namespace").WithStatus(gwv1ac.GatewayStatus().WithConditions(
		metav1ApplyCondition("Programmed", reason)))
}

func TestGatewayStatusIsAppliedOnlyWhenChanged(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	ctx := context.Background()
	cfg := env.RESTConfig()
	cfg.UserAgent = "ownedstatus-test"
	kube := kubernetes.NewForConfigOrDie(env.RESTConfig())
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gateway-namespace"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Gateway is the user's: created by another client than the writer's.
	gw := gatewayclient.NewForConfigOrDie(cfg).GatewayV1().Gateways("gateway-namespace")
	_, err := gatewayclient.NewForConfigOrDie(env.RESTConfig()).GatewayV1().Gateways("gateway-namespace").Create(ctx, &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gateway-namespace", Name: "gateway"},
		Spec: gwv1.GatewaySpec{GatewayClassName: "istio", Listeners: []gwv1.Listener{{
			Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := apply.OwnedStatus[*gwv1.Gateway, *gwv1ac.GatewayApplyConfiguration]{FieldManager: manager, ExtractStatus: gwv1ac.ExtractGatewayStatus}
	for i, step := range []struct {
		reason string
		wrote  bool
	}{{"Programmed", true}, {"Programmed", false}, {"Pending", true}, {"Pending", false}} {
		wrote, err := w.Apply(ctx, gw, "gateway-namespace", "gateway", gatewayStatus(step.reason))
		if err != nil || wrote != step.wrote {
			t.Fatalf("step %d (%s): wrote=%v err=%v, want wrote=%v", i, step.reason, wrote, err, step.wrote)
		}
		live, err := gw.Get(ctx, "gateway", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, c := range live.Status.Conditions {
			if c.Type == "Programmed" {
				found = c.Reason == step.reason
			}
		}
		if !found {
			t.Fatalf("step %d: live conditions %+v, want Programmed with reason %s", i, live.Status.Conditions, step.reason)
		}
	}
	// The audit log: exactly two status writes by our manager, both applies
	// of the status subresource.
	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var writes int
	for _, e := range events {
		if e.UserAgent == "ownedstatus-test" && e.Resource == "gateways" && e.IsWrite() {
			writes++
			if e.Subresource != "status" || e.Verb != "patch" || e.FieldManager != manager {
				t.Errorf("write %+v, want a patch of gateways/status by %s", e, manager)
			}
		}
	}
	if writes != 2 {
		t.Fatalf("%d writes of the Gateway by the test's client, want 2 (the two changes)", writes)
	}
}

func metav1ApplyCondition(typ, reason string) *metav1ac.ConditionApplyConfiguration {
	return metav1ac.Condition().WithType(typ).WithStatus(metav1.ConditionTrue).WithReason(reason).
		WithMessage("ok").WithLastTransitionTime(metav1.Unix(1, 0)).WithObservedGeneration(1)
}
