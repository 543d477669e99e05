// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// fakeMirrorResolve resolves a Service named "ok" and nothing else.
func fakeMirrorResolve(_, ns string, ref gwv1.BackendRef) ResolvedBackend {
	rb := ResolvedBackend{Kind: "Service", Key: types.NamespacedName{Namespace: ns, Name: string(ref.Name)}}
	if ref.Name == "ok" {
		rb.ResolvedRefs, rb.Service = true, &ServiceBackend{}
		return rb
	}
	rb.Reason, rb.Message = gwv1.RouteReasonBackendNotFound, "no Service "+string(ref.Name)
	return rb
}

func httpMirrorTo(name string) gwv1.HTTPRouteFilter {
	return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror,
		RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name)}}}
}

func grpcMirrorTo(name string) gwv1.GRPCRouteFilter {
	return gwv1.GRPCRouteFilter{Type: gwv1.GRPCRouteFilterRequestMirror,
		RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name)}}}
}

func mirrorNames[F any](fs []F, mirror func(*F) *gwv1.HTTPRequestMirrorFilter) []string {
	var out []string
	for i := range fs {
		if m := mirror(&fs[i]); m != nil {
			out = append(out, string(m.BackendRef.Name))
		}
	}
	return out
}

func backendNames(rbs []ResolvedBackend) []string {
	var out []string
	for _, rb := range rbs {
		out = append(out, rb.Key.Name)
	}
	return out
}

// TestDropUnresolvedMirrors: of the RequestMirror filters of a rule and of
// its backendRefs, those whose backendRef does not resolve leave the rule
// the translator gets and are recorded as MirrorErrors; the resolved ones
// stay and are recorded as Mirrors; the objects the rule points into (the
// informer's) are never changed; HTTPRoute and GRPCRoute rules alike.
func TestDropUnresolvedMirrors(t *testing.T) {
	route := Route{Kind: "HTTPRoute", Namespace: "team-a", Name: "r"}
	t.Run("HTTPRoute", func(t *testing.T) {
		spec := &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{httpMirrorTo("ok"), httpMirrorTo("gone-rule")}}
		perBackend := [][]gwv1.HTTPRouteFilter{{httpMirrorTo("ok")}, {httpMirrorTo("gone-backend"), httpMirrorTo("ok")}}
		specBefore, perBackendBefore := slices.Clone(spec.Filters), slices.Clone(perBackend[1])
		rule := RuleResult{HTTP: spec, HTTPFilters: perBackend}
		dropUnresolvedMirrors(&rule, route, fakeMirrorResolve)

		if got := mirrorNames(rule.HTTP.Filters, httpMirror); !slices.Equal(got, []string{"ok"}) {
			t.Errorf("rule filters mirror to %v, want [ok]", got)
		}
		if got := mirrorNames(rule.HTTPFilters[0], httpMirror); !slices.Equal(got, []string{"ok"}) {
			t.Errorf("backendRef 0 filters mirror to %v, want [ok]", got)
		}
		if got := mirrorNames(rule.HTTPFilters[1], httpMirror); !slices.Equal(got, []string{"ok"}) {
			t.Errorf("backendRef 1 filters mirror to %v, want [ok]", got)
		}
		if got := backendNames(rule.MirrorErrors); !slices.Equal(got, []string{"gone-rule", "gone-backend"}) {
			t.Errorf("MirrorErrors = %v, want [gone-rule gone-backend]", got)
		}
		if got := backendNames(rule.Mirrors); !slices.Equal(got, []string{"ok", "ok", "ok"}) {
			t.Errorf("Mirrors = %v, want three resolved", got)
		}
		if len(spec.Filters) != 2 || spec.Filters[1].RequestMirror != specBefore[1].RequestMirror {
			t.Error("the informer's rule filters were changed")
		}
		if len(perBackend[1]) != 2 || perBackend[1][0].RequestMirror != perBackendBefore[0].RequestMirror {
			t.Error("the informer's backendRef filters were changed")
		}
	})
	t.Run("GRPCRoute", func(t *testing.T) {
		route := route
		route.Kind = "GRPCRoute"
		spec := &gwv1.GRPCRouteRule{Filters: []gwv1.GRPCRouteFilter{grpcMirrorTo("ok")}}
		perBackend := [][]gwv1.GRPCRouteFilter{{grpcMirrorTo("gone-backend")}}
		rule := RuleResult{GRPC: spec, GRPCFilters: perBackend}
		dropUnresolvedMirrors(&rule, route, fakeMirrorResolve)
		if rule.GRPC != spec {
			t.Error("the rule was copied though its own filters all resolve")
		}
		if got := mirrorNames(rule.GRPCFilters[0], grpcMirror); len(got) != 0 {
			t.Errorf("backendRef 0 filters mirror to %v, want none", got)
		}
		if got := backendNames(rule.MirrorErrors); !slices.Equal(got, []string{"gone-backend"}) {
			t.Errorf("MirrorErrors = %v, want [gone-backend]", got)
		}
		if len(perBackend[0]) != 1 {
			t.Error("the informer's backendRef filters were changed")
		}
	})
}
