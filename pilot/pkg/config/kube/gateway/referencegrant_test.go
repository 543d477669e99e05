// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// grant returns a ReferenceGrant in ns from HTTPRoutes in fromNS to
// group/kind (and name, when set).
func grant(ns, fromKind, fromNS, group, kind, name string) *gwv1.ReferenceGrant {
	to := gwv1.ReferenceGrantTo{Group: gwv1.Group(group), Kind: gwv1.Kind(kind)}
	if name != "" {
		to.Name = ptr.To(gwv1.ObjectName(name))
	}
	return &gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grant"},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: GatewayGroup, Kind: gwv1.Kind(fromKind), Namespace: gwv1.Namespace(fromNS)}},
			To:   []gwv1.ReferenceGrantTo{to},
		},
	}
}

func TestReferenceGrantAllows(t *testing.T) {
	pool := GroupKind{InferencePoolGroup, InferencePoolKind}
	route := GroupKind{GatewayGroup, HTTPRouteKind}
	cases := []struct {
		name  string
		grant *gwv1.ReferenceGrant
		want  bool
	}{
		{"any name", grant("pools", "HTTPRoute", "routes", InferencePoolGroup, InferencePoolKind, ""), true},
		{"this name", grant("pools", "HTTPRoute", "routes", InferencePoolGroup, InferencePoolKind, "p"), true},
		{"another name", grant("pools", "HTTPRoute", "routes", InferencePoolGroup, InferencePoolKind, "q"), false},
		{"another kind (Service)", grant("pools", "HTTPRoute", "routes", "", "Service", ""), false},
		{"another from kind", grant("pools", "GRPCRoute", "routes", InferencePoolGroup, InferencePoolKind, ""), false},
		{"another from namespace", grant("pools", "HTTPRoute", "elsewhere", InferencePoolGroup, InferencePoolKind, ""), false},
		{"grant in another namespace", grant("routes", "HTTPRoute", "routes", InferencePoolGroup, InferencePoolKind, ""), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReferenceGrantAllows([]*gwv1.ReferenceGrant{tc.grant}, "pools", route, "routes", pool, "p"); got != tc.want {
				t.Fatalf("ReferenceGrantAllows = %v, want %v", got, tc.want)
			}
		})
	}
	if ReferenceGrantAllows(nil, "pools", route, "routes", pool, "p") {
		t.Errorf("no grants allowed the reference")
	}
}
