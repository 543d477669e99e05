// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// Every header modifier Envoy refuses makes its rule a problem that names
// the Gateway API field, and the translator leaves exactly that rule out:
// the route's other rule, and the other routes of the Gateway, are built
// and the set passes Validate.
func TestRefusedHeaderModifiersDropTheRule(t *testing.T) {
	good := model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/good")}}, Backends: backendTo("a")}
	cases := []struct {
		name      string
		bad       model.Rule
		field     string
		inMessage string
	}{
		{"crlf", model.Rule{HTTP: &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{
			reqHeaderFilter(gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{hdr("X-Ok", "1"), hdr("X-Injected", "a\r\nx-evil: 1")}})}}, Backends: backendTo("a")},
			"filters[0].requestHeaderModifier.set[1].value", `"\r" at byte 1`},
		{"nul-backend", model.Rule{HTTP: &gwv1.HTTPRouteRule{}, Backends: []model.Backend{{Weight: 1, Service: svc("ns", "a", 80),
			HTTPFilters: []gwv1.HTTPRouteFilter{respHeaderFilter(gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{hdr("X-Nul", "a\x00b")}})}}}},
			"backendRefs[0].filters[0].responseHeaderModifier.add[0].value", "NUL, CR and LF"},
		{"host-remove", model.Rule{HTTP: &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{
			reqHeaderFilter(gwv1.HTTPHeaderFilter{Remove: []string{"X-Gone", "Host"}})}}, Backends: backendTo("a")},
			"filters[0].requestHeaderModifier.remove[1]", `"Host" cannot be removed`},
		{"response-host", model.Rule{HTTP: &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{
			respHeaderFilter(gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{hdr("host", "x")}})}}, Backends: backendTo("a")},
			"filters[0].responseHeaderModifier.set[0].name", "cannot be set"},
		{"regex", model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/ok"),
			{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchRegularExpression), Value: ptr.To("/(a")}}}}, Backends: backendTo("a")},
			"matches[1]", "missing closing )"},
		{"grpc-crlf", model.Rule{GRPC: &gwv1.GRPCRouteRule{Filters: []gwv1.GRPCRouteFilter{{Type: gwv1.GRPCRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{hdr("X-A", "\n")}}}}}, Backends: backendTo("a")},
			"filters[0].requestHeaderModifier.add[0].value", "NUL, CR and LF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httpRoute("ns", c.name, []string{"bad.example.com"}, good, c.bad)
			ps := CheckRoute(r, Options{})
			if len(ps) != 1 || ps[0].Rule != 1 || ps[0].Field != c.field || !strings.Contains(ps[0].Message, c.inMessage) {
				t.Fatalf("CheckRoute = %+v, want one problem in rule 1 at %s mentioning %q", ps, c.field, c.inMessage)
			}
			other := hostRoute("other", nil, backendTo("a"))
			res := build(t, gateway(r, other), Inputs{}, Options{})
			var names []string
			for _, rt := range routesOf(t, res, "http.80", "bad.example.com:80") {
				names = append(names, rt.GetName())
			}
			if strings.Join(names, ",") != "ns."+c.name+".0" {
				t.Errorf("routes of the bad route's host: %v, want only rule 0 (ns.%s.0)", names, c.name)
			}
			if got := routesOf(t, res, "http.80", "other.example.com:80"); len(got) != 1 || got[0].GetRoute().GetCluster() == "" {
				t.Errorf("the other route: %v, want it routed", got)
			}
		})
	}
}

// A route whose rules are all valid has no problem, and CheckRoute agrees
// with the translator on the seed (an InferencePool rule with its
// ExtProcPerRoute).
func TestCheckRouteAcceptsValidRules(t *testing.T) {
	for _, r := range seedGateway().Listeners[0].Routes {
		if ps := CheckRoute(r, inferenceOn); len(ps) != 0 {
			t.Errorf("seed route %s/%s: %+v, want none", r.Namespace, r.Name, ps)
		}
	}
	r := hostRoute("pct", []gwv1.HTTPRouteFilter{reqHeaderFilter(gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{hdr("X-D", "100%")}})}, backendTo("a"))
	if ps := CheckRoute(r, Options{}); len(ps) != 0 {
		t.Errorf("a %% value (escaped by the translator): %+v, want none", ps)
	}
}
