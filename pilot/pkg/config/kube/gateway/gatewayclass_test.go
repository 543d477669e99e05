// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func gatewayClass(name, ctrl string) *gwv1.GatewayClass {
	return &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2},
		Spec:       gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController(ctrl)},
	}
}

func TestOurGatewayClassNames(t *testing.T) {
	classes := []*gwv1.GatewayClass{
		gatewayClass("zeta", controller),
		gatewayClass("other", "example.com/other-controller"),
		nil,
		gatewayClass("istio", controller),
	}
	if d := cmp.Diff([]string{"istio", "zeta"}, OurGatewayClassNames(classes, controller)); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if IsOurGatewayClass(classes[1], controller) {
		t.Errorf("a class of another controller is ours")
	}
}

func TestGatewayClassAcceptedCondition(t *testing.T) {
	cases := []struct {
		name, problem      string
		wantStatus, reason string
	}{
		{name: "accepted", wantStatus: "True", reason: "Accepted"},
		{name: "invalid parameters", problem: "ConfigMap ns/p named by spec.parametersRef does not exist", wantStatus: "False", reason: "InvalidParameters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gc := gatewayClass("istio", controller)
			c := GatewayClassAcceptedCondition(gc, tc.problem, now)
			if c.Type != "Accepted" || string(c.Status) != tc.wantStatus || c.Reason != tc.reason || c.ObservedGeneration != 2 || !c.LastTransitionTime.Equal(&now) {
				t.Fatalf("condition = %+v, want Accepted=%s (%s), generation 2", c, tc.wantStatus, tc.reason)
			}
			if tc.problem != "" && c.Message != tc.problem {
				t.Errorf("message = %q, want the problem %q", c.Message, tc.problem)
			}
		})
	}
}
