// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

func reqHeaderFilter(f gwv1.HTTPHeaderFilter) gwv1.HTTPRouteFilter {
	return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &f}
}

func respHeaderFilter(f gwv1.HTTPHeaderFilter) gwv1.HTTPRouteFilter {
	return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &f}
}

func hdr(name, value string) gwv1.HTTPHeader {
	return gwv1.HTTPHeader{Name: gwv1.HTTPHeaderName(name), Value: value}
}

// hostRoute is an HTTPRoute for host h with one rule of filters to
// backends.
func hostRoute(h string, filters []gwv1.HTTPRouteFilter, backends []model.Backend) *model.Route {
	return httpRoute("ns", h, []string{h + ".example.com"}, model.Rule{HTTP: &gwv1.HTTPRouteRule{Filters: filters}, Backends: backends})
}

// assertNoReservedHeaders fails when any level of rt carries a host or
// ':'-prefixed header modification (Envoy rejects the route configuration).
func assertNoReservedHeaders(t *testing.T, rt *routev3.Route) {
	t.Helper()
	reserved := func(k string) bool { return strings.HasPrefix(k, ":") || strings.EqualFold(k, "host") }
	type lists interface {
		GetRequestHeadersToAdd() []*corev3.HeaderValueOption
		GetRequestHeadersToRemove() []string
		GetResponseHeadersToAdd() []*corev3.HeaderValueOption
		GetResponseHeadersToRemove() []string
	}
	all := []lists{rt}
	for _, cw := range rt.GetRoute().GetWeightedClusters().GetClusters() {
		all = append(all, cw)
	}
	for _, l := range all {
		for _, o := range append(l.GetRequestHeadersToAdd(), l.GetResponseHeadersToAdd()...) {
			if reserved(o.GetHeader().GetKey()) {
				t.Errorf("route %s adds header %q", rt.GetName(), o.GetHeader().GetKey())
			}
		}
		for _, k := range append(l.GetRequestHeadersToRemove(), l.GetResponseHeadersToRemove()...) {
			if reserved(k) {
				t.Errorf("route %s removes header %q", rt.GetName(), k)
			}
		}
	}
}

// A Host set or add in a RequestHeaderModifier becomes
// RouteAction.host_rewrite_literal, never a host entry in headers_to_add
// (Envoy's HeaderParser rejects it, and with it the route configuration);
// a Host remove and a response Host modification make the rule invalid
// (TestRefusedHeaderModifiersDropTheRule).
func TestHostHeaderBecomesHostRewrite(t *testing.T) {
	rewrite := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{Hostname: ptr.To(gwv1.PreciseHostname("rewrite.internal"))}}
	withHost := func(value string) []model.Backend {
		return []model.Backend{{Weight: 1, Service: svc("ns", "a", 80), HTTPFilters: []gwv1.HTTPRouteFilter{
			reqHeaderFilter(gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{hdr("Host", value)}}),
		}}}
	}
	twoBackends := func(ruleHost bool) *model.Route {
		var fs []gwv1.HTTPRouteFilter
		if ruleHost {
			fs = append(fs, reqHeaderFilter(gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{hdr("host", "rule.internal")}}))
		}
		bs := append(withHost("share-a.internal"), model.Backend{Weight: 1, Service: svc("ns", "b", 80)})
		name := "weighted"
		if ruleHost {
			name = "weightedrule"
		}
		return hostRoute(name, fs, bs)
	}
	grpc := httpRoute("ns", "grpc", []string{"grpc.example.com"}, model.Rule{
		GRPC: &gwv1.GRPCRouteRule{Filters: []gwv1.GRPCRouteFilter{{
			Type:                  gwv1.GRPCRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{hdr("Host", "grpc.internal")}},
		}}},
		Backends: grpcBackendTo("a"),
	})
	grpc.Kind = "GRPCRoute"
	gw := gateway(
		hostRoute("set", []gwv1.HTTPRouteFilter{reqHeaderFilter(gwv1.HTTPHeaderFilter{
			Set: []gwv1.HTTPHeader{hdr("Host", "upstream.internal"), hdr("X-Kept", "yes")},
		})}, backendTo("a")),
		hostRoute("setadd", []gwv1.HTTPRouteFilter{reqHeaderFilter(gwv1.HTTPHeaderFilter{
			Add: []gwv1.HTTPHeader{hdr("Host", "added.internal")}, Set: []gwv1.HTTPHeader{hdr("HOST", "set.internal")},
		})}, backendTo("a")),
		hostRoute("add", []gwv1.HTTPRouteFilter{reqHeaderFilter(gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{hdr("host", "added.internal")}})}, backendTo("a")),
		hostRoute("urlrewrite", []gwv1.HTTPRouteFilter{rewrite, reqHeaderFilter(gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{hdr("Host", "header.internal")}})}, backendTo("a")),
		hostRoute("backend", nil, withHost("backend.internal")),
		hostRoute("rulewins", []gwv1.HTTPRouteFilter{reqHeaderFilter(gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{hdr("Host", "rule.internal")}})}, withHost("backend.internal")),
		twoBackends(false),
		twoBackends(true),
		grpc,
	)
	res := build(t, gw, Inputs{}, Options{})
	route := func(h string) *routev3.Route {
		rt := routesOf(t, res, "http.80", h+".example.com:80")[0]
		assertNoReservedHeaders(t, rt)
		return rt
	}
	for h, want := range map[string]string{
		"set": "upstream.internal", "setadd": "set.internal", "add": "added.internal",
		"urlrewrite": "rewrite.internal", "backend": "backend.internal", "rulewins": "rule.internal",
		"weightedrule": "rule.internal", "weighted": "",
	} {
		if got := route(h).GetRoute().GetHostRewriteLiteral(); got != want {
			t.Errorf("%s: host_rewrite_literal %q, want %q", h, got, want)
		}
	}
	if got := routesOf(t, res, "http.80", "grpc.example.com:80")[0].GetRoute().GetHostRewriteLiteral(); got != "grpc.internal" {
		t.Errorf("GRPCRoute: host_rewrite_literal %q, want grpc.internal", got)
	}
	if adds := route("set").GetRequestHeadersToAdd(); len(adds) != 1 || adds[0].GetHeader().GetKey() != "x-kept" {
		t.Errorf("set: request_headers_to_add %v, want only x-kept", adds)
	}
	wc := route("weighted").GetRoute().GetWeightedClusters().GetClusters()
	if len(wc) != 2 || wc[0].GetHostRewriteLiteral() != "share-a.internal" || wc[1].GetHostRewriteLiteral() != "" {
		t.Errorf("weighted: entries %v, want share a's host_rewrite_literal share-a.internal", wc)
	}
	for _, cw := range route("weightedrule").GetRoute().GetWeightedClusters().GetClusters() {
		if cw.GetHostRewriteLiteral() != "" {
			t.Errorf("weightedrule: entry %s has host_rewrite_literal %q; the rule's Host wins", cw.GetName(), cw.GetHostRewriteLiteral())
		}
	}
}

// Gateway API header values are literal; Envoy reads headers_to_add values
// as substitution format strings, so every '%' is written "%%", on
// requests and responses, at route and weighted cluster level.
func TestHeaderValuesEscapedForEnvoyFormatter(t *testing.T) {
	mods := gwv1.HTTPHeaderFilter{
		Set: []gwv1.HTTPHeader{hdr("X-Discount", "100%")},
		Add: []gwv1.HTTPHeader{hdr("X-Template", "%START_TIME% and 50%%")},
	}
	gw := gateway(
		hostRoute("route", []gwv1.HTTPRouteFilter{reqHeaderFilter(mods), respHeaderFilter(mods)}, backendTo("a")),
		hostRoute("weighted", nil, []model.Backend{
			{Weight: 1, Service: svc("ns", "a", 80), HTTPFilters: []gwv1.HTTPRouteFilter{reqHeaderFilter(mods), respHeaderFilter(mods)}},
			{Weight: 1, Service: svc("ns", "b", 80)},
		}),
	)
	res := build(t, gw, Inputs{}, Options{})
	want := map[string]string{"x-discount": "100%%", "x-template": "%%START_TIME%% and 50%%%%"}
	check := func(where string, adds []*corev3.HeaderValueOption) {
		t.Helper()
		if len(adds) != len(want) {
			t.Errorf("%s: %d headers, want %d", where, len(adds), len(want))
		}
		for _, o := range adds {
			if w := want[o.GetHeader().GetKey()]; o.GetHeader().GetValue() != w {
				t.Errorf("%s: %s = %q, want %q", where, o.GetHeader().GetKey(), o.GetHeader().GetValue(), w)
			}
		}
	}
	rt := routesOf(t, res, "http.80", "route.example.com:80")[0]
	check("route request", rt.GetRequestHeadersToAdd())
	check("route response", rt.GetResponseHeadersToAdd())
	cw := routesOf(t, res, "http.80", "weighted.example.com:80")[0].GetRoute().GetWeightedClusters().GetClusters()[0]
	check("weighted cluster request", cw.GetRequestHeadersToAdd())
	check("weighted cluster response", cw.GetResponseHeadersToAdd())
}

// checkLiteralFormat follows Envoy's SubstitutionFormatParser: "%%" is a
// literal '%', a lone '%' is refused, and (stricter) so is any command.
func TestCheckLiteralFormat(t *testing.T) {
	for v, want := range map[string]string{
		"":                   "",
		"plain":              "",
		"100%%":              "",
		"%%%%x%%":            "",
		"100%":               "Couldn't find valid command at position 3",
		"50% off":            "Couldn't find valid command at position 2",
		"%%%":                "Couldn't find valid command at position 2",
		"%lower%":            "Couldn't find valid command at position 0",
		"%START_TIME%":       "formatter command %START_TIME%",
		"a %REQ(x-y):10% b":  "formatter command %REQ%",
		"%%%DOWNSTREAM_X%%%": "formatter command %DOWNSTREAM_X%",
	} {
		err := checkLiteralFormat(v)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v, want accepted", v, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want an error containing %q", v, err, want)
		}
	}
}
