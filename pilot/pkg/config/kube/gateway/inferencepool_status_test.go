// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/upstreamtls"
)

const controller = "istio.io/gateway-controller"

var (
	now       = metav1.NewTime(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	seedGW    = types.NamespacedName{Namespace: "gateway-namespace", Name: "gateway"}
	seedRoute = types.NamespacedName{Namespace: "llm-namespace", Name: "llm-route"}
)

func seedEPP() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "llm-namespace", Name: "vllm-llama3-8b-epp"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 9002, AppProtocol: ptr.To("http2")}}},
	}
}

func accepted(gw types.NamespacedName) PoolParent {
	return PoolParent{Gateway: gw, Routes: []RouteAttachment{{Kind: "HTTPRoute", Route: seedRoute, Accepted: true}}}
}

// conds returns type=status(reason) of each condition, as the seed's
// write-up prints the pool's status.
func conds(st inferencev1.ParentStatus) []string {
	var out []string
	for _, c := range st.Conditions {
		out = append(out, c.Type+"="+string(c.Status)+" ("+c.Reason+")")
	}
	return out
}

func TestPoolStatusSeed(t *testing.T) {
	pool := seedPool()
	pool.Generation = 3
	got := PoolParentStatuses(pool, []PoolParent{accepted(seedGW)}, seedEPP(), upstreamtls.Result{}, controller, now)
	if len(got) != 1 {
		t.Fatalf("%d entries, want 1", len(got))
	}
	st := got[0]
	if d := cmp.Diff([]string{"Accepted=True (Accepted)", "ResolvedRefs=True (ResolvedRefs)"}, conds(st)); d != "" {
		t.Fatalf("conditions as the seed's write-up prints them (-want +got):\n%s", d)
	}
	wantRef := inferencev1.ParentReference{Group: ptr.To(inferencev1.Group("gateway.networking.k8s.io")), Kind: "Gateway",
		Namespace: "gateway-namespace", Name: "gateway"}
	if d := cmp.Diff(wantRef, st.ParentRef); d != "" {
		t.Fatalf("parentRef (-want +got):\n%s", d)
	}
	if st.ControllerName != controller {
		t.Errorf("controllerName = %q", st.ControllerName)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 3 || !c.LastTransitionTime.Equal(&now) {
			t.Errorf("%s: observedGeneration %d, lastTransitionTime %v", c.Type, c.ObservedGeneration, c.LastTransitionTime)
		}
	}
}

func TestPoolStatusTwoGatewaysTwoEntries(t *testing.T) {
	other := types.NamespacedName{Namespace: "a-namespace", Name: "gw2"}
	got := PoolParentStatuses(seedPool(), []PoolParent{accepted(seedGW), accepted(other)}, seedEPP(), upstreamtls.Result{}, controller, now)
	if len(got) != 2 || got[0].ParentRef.Name != "gw2" || got[1].ParentRef.Name != "gateway" {
		t.Fatalf("entries = %+v, want gw2 then gateway (sorted by namespace/name)", got)
	}
}

func TestPoolStatusAccepted(t *testing.T) {
	rejected := PoolParent{Gateway: seedGW, Routes: []RouteAttachment{
		{Kind: "HTTPRoute", Route: seedRoute, Reason: "NotAllowedByListeners", Message: "namespace llm-namespace is not allowed"},
	}}
	got := PoolParentStatuses(seedPool(), []PoolParent{rejected}, seedEPP(), upstreamtls.Result{}, controller, now)[0].Conditions[0]
	if got.Status != metav1.ConditionFalse || got.Reason != "HTTPRouteNotAccepted" ||
		!strings.Contains(got.Message, "HTTPRoute llm-namespace/llm-route") || !strings.Contains(got.Message, "NotAllowedByListeners") {
		t.Fatalf("Accepted = %+v, want False/HTTPRouteNotAccepted naming the route and its reason", got)
	}

	mixed := rejected
	mixed.Routes = append(mixed.Routes, RouteAttachment{Kind: "GRPCRoute", Route: seedRoute, Accepted: true})
	if got := PoolParentStatuses(seedPool(), []PoolParent{mixed}, seedEPP(), upstreamtls.Result{}, controller, now)[0].Conditions[0]; got.Status != metav1.ConditionTrue {
		t.Fatalf("one accepted route of two: Accepted = %+v, want True", got)
	}

	noEPP := seedPool()
	noEPP.Spec.EndpointPickerRef = nil
	st := PoolParentStatuses(noEPP, []PoolParent{accepted(seedGW)}, nil, upstreamtls.Result{}, controller, now)[0]
	if d := cmp.Diff([]string{"Accepted=False (EndpointPickerRefMissing)", "ResolvedRefs=True (ResolvedRefs)"}, conds(st)); d != "" {
		t.Fatalf("pool without endpointPickerRef (-want +got):\n%s", d)
	}
}

func TestPoolStatusResolvedRefs(t *testing.T) {
	external := seedEPP()
	external.Spec.Type = corev1.ServiceTypeExternalName
	cases := []struct {
		name   string
		mutate func(*inferencev1.EndpointPickerRef)
		epp    *corev1.Service
		want   string // message fragment of ResolvedRefs=False, or "" for True
	}{
		{name: "resolved", epp: seedEPP()},
		{name: "kind Service spelled out", mutate: func(r *inferencev1.EndpointPickerRef) { r.Kind = "Service" }, epp: seedEPP()},
		{name: "wrong group", mutate: func(r *inferencev1.EndpointPickerRef) { r.Group = ptr.To(inferencev1.Group("example.com")) }, epp: seedEPP(), want: `group "example.com"`},
		{name: "wrong kind", mutate: func(r *inferencev1.EndpointPickerRef) { r.Kind = "Pod" }, epp: seedEPP(), want: `kind "Pod"`},
		{name: "empty name", mutate: func(r *inferencev1.EndpointPickerRef) { r.Name = "" }, epp: seedEPP(), want: "name is empty"},
		{name: "missing Service", epp: nil, want: "Service llm-namespace/vllm-llama3-8b-epp not found"},
		{name: "ExternalName", epp: external, want: "ExternalName"},
		{name: "port not on the Service", mutate: func(r *inferencev1.EndpointPickerRef) { r.Port.Number = 9003 }, epp: seedEPP(), want: "has no port 9003"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := seedPool()
			if tc.mutate != nil {
				tc.mutate(pool.Spec.EndpointPickerRef)
			}
			got := PoolParentStatuses(pool, []PoolParent{accepted(seedGW)}, tc.epp, upstreamtls.Result{}, controller, now)[0].Conditions[1]
			if got.Type != "ResolvedRefs" {
				t.Fatalf("second condition is %s", got.Type)
			}
			if tc.want == "" {
				if got.Status != metav1.ConditionTrue || got.Reason != "ResolvedRefs" {
					t.Fatalf("ResolvedRefs = %+v, want True/ResolvedRefs", got)
				}
				return
			}
			if got.Status != metav1.ConditionFalse || got.Reason != "InvalidExtensionRef" || !strings.Contains(got.Message, tc.want) {
				t.Fatalf("ResolvedRefs = %+v, want False/InvalidExtensionRef containing %q", got, tc.want)
			}
		})
	}
}
