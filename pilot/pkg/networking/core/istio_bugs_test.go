// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"testing"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// The tests in this file are the Istio bugs of
// /work/shared/reference/gie-facts.md that live in xDS translation.

// Istio bug 2: two pools as weighted backends of one rule share the last
// pool's EPP. Each weighted cluster must carry its own override calling its
// own EPP with its own failure mode, and the route itself none.
func TestWeightedPoolsEachCallTheirOwnEPP(t *testing.T) {
	a := pool("llm", "pool-a", inferencev1.EndpointPickerFailOpen)
	b := pool("llm", "pool-b", inferencev1.EndpointPickerFailClose)
	gw := gateway(httpRoute("llm", "split", nil, model.Rule{
		Backends: []model.Backend{{Weight: 70, Pool: a}, {Weight: 30, Pool: b}},
	}))
	res := build(t, gw, Inputs{}, inferenceOn)
	routes := routesOf(t, res, "http.80", "*:80")
	if len(routes) != 1 {
		t.Fatalf("got %d routes, want 1", len(routes))
	}
	r := routes[0]
	if per := extProcOf(t, r.TypedPerFilterConfig); per != nil {
		t.Errorf("route-level ext_proc override %v: a shared override makes both pools call one EPP", per)
	}
	wc := r.GetRoute().GetWeightedClusters().GetClusters()
	if len(wc) != 2 {
		t.Fatalf("got %d weighted clusters, want 2", len(wc))
	}
	want := []struct {
		cluster, epp string
		weight       uint32
		failOpen     bool
	}{
		{ClusterName(54321, a.Host), ClusterName(9002, a.EPP.Host), 70, true},
		{ClusterName(54321, b.Host), ClusterName(9002, b.EPP.Host), 30, false},
	}
	for i, w := range want {
		if wc[i].Name != w.cluster || wc[i].GetWeight().GetValue() != w.weight {
			t.Errorf("weighted cluster %d = %s/%d, want %s/%d", i, wc[i].Name, wc[i].GetWeight().GetValue(), w.cluster, w.weight)
		}
		assertEPPOverride(t, extProcOf(t, wc[i].TypedPerFilterConfig), w.epp, w.failOpen)
	}
	// Both EPP clusters exist (Validate checked the references).
	clusterNamed(t, res, want[0].epp)
	clusterNamed(t, res, want[1].epp)
}

// Istio bug 3: a CORS policy on the rule replaced the per-route filter
// config map and wiped the ext_proc override. Both must be there, along
// with the rule's other filters.
func TestCORSKeepsTheEPPOverride(t *testing.T) {
	p := seedPool()
	rule := &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{
		{Type: gwv1.HTTPRouteFilterCORS, CORS: &gwv1.HTTPCORSFilter{
			AllowOrigins:     []gwv1.CORSOrigin{"https://app.example.com", "https://*.example.org"},
			AllowMethods:     []gwv1.HTTPMethodWithWildcard{"GET", "POST"},
			AllowCredentials: ptr.To(true),
			MaxAge:           600,
		}},
		{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
			Set: []gwv1.HTTPHeader{{Name: "X-Team", Value: "ml"}},
		}},
	}}
	gw := gateway(httpRoute("llm-namespace", "cors", []string{"llm.example.com"}, model.Rule{
		HTTP: rule, Backends: []model.Backend{{Weight: 1, Pool: p}},
	}))
	res := build(t, gw, Inputs{}, inferenceOn)
	rs := routesOf(t, res, "http.80", "llm.example.com:80")
	r := rs[len(rs)-1] // the rule's route; before it, its CORS preflight route (route_cors_test.go)
	assertEPPOverride(t, extProcOf(t, r.TypedPerFilterConfig), seedEPPCluster, true)
	cors := &corsv3.CorsPolicy{}
	if a := r.TypedPerFilterConfig[FilterCORS]; a == nil {
		t.Fatal("no CORS policy on the route")
	} else if err := a.UnmarshalTo(cors); err != nil {
		t.Fatal(err)
	}
	if len(cors.AllowOriginStringMatch) != 2 || cors.AllowMethods != "GET,POST" || cors.MaxAge != "600" || !cors.GetAllowCredentials().GetValue() {
		t.Errorf("CORS policy = %v", cors)
	}
	// A preflight from an origin the policy does not allow is answered by
	// the CORS filter, never forwarded to the backend (Envoy forwards it
	// by default).
	if f := cors.GetForwardNotMatchingPreflights(); f == nil || f.GetValue() {
		t.Errorf("forward_not_matching_preflights = %v, want false", f)
	}
	if len(r.RequestHeadersToAdd) != 1 || r.RequestHeadersToAdd[0].Header.Key != "x-team" {
		t.Errorf("request headers to add = %v", r.RequestHeadersToAdd)
	}
}

// Istio bug 4: GRPCRoute backends that are InferencePools skipped the EPP.
func TestGRPCRouteToPoolGoesThroughTheEPP(t *testing.T) {
	p := pool("llm", "grpc-pool", inferencev1.EndpointPickerFailClose)
	p.AppProtocol = inferencev1.AppProtocolH2C // gRPC needs HTTP/2 to the model servers
	r := &model.Route{Kind: "GRPCRoute", Namespace: "llm", Name: "grpc", Rules: []model.Rule{{
		GRPC: &gwv1.GRPCRouteRule{Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{
			Service: ptr.To("inference.v1.Generator"), Method: ptr.To("Generate"),
		}}}},
		Backends: []model.Backend{{Weight: 1, Pool: p}},
	}}}
	res := build(t, gateway(r), Inputs{}, inferenceOn)
	rt := routesOf(t, res, "http.80", "*:80")[0]
	if got := rt.Match.GetPath(); got != "/inference.v1.Generator/Generate" {
		t.Errorf("path = %q", got)
	}
	if got := rt.GetRoute().GetCluster(); got != ClusterName(54321, p.Host) {
		t.Errorf("cluster = %q", got)
	}
	assertEPPOverride(t, extProcOf(t, rt.TypedPerFilterConfig), ClusterName(9002, p.EPP.Host), false)
	if clusterNamed(t, res, ClusterName(54321, p.Host)).TypedExtensionProtocolOptions[HTTPProtocolOptionsKey] == nil {
		t.Error("shadow cluster of an h2c pool is not HTTP/2")
	}
}

// FailOpen and FailClose pools on one listener keep their own modes.
func TestFailOpenAndFailClosePoolsOnOneListener(t *testing.T) {
	open := pool("llm", "open", inferencev1.EndpointPickerFailOpen)
	closed := pool("llm", "closed", inferencev1.EndpointPickerFailClose)
	gw := gateway(
		httpRoute("llm", "r-open", []string{"open.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 1, Pool: open}}}),
		httpRoute("llm", "r-closed", []string{"closed.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 1, Pool: closed}}}),
	)
	res := build(t, gw, Inputs{}, inferenceOn)
	ro := routesOf(t, res, "http.80", "open.example.com:80")[0]
	rc := routesOf(t, res, "http.80", "closed.example.com:80")[0]
	assertEPPOverride(t, extProcOf(t, ro.TypedPerFilterConfig), ClusterName(9002, open.EPP.Host), true)
	assertEPPOverride(t, extProcOf(t, rc.TypedPerFilterConfig), ClusterName(9002, closed.EPP.Host), false)
}

// An ordinary Service route on the Gateway of a pool route never reaches an
// EPP: it has no ext_proc entry (so the disabled filter stays off for it),
// and the listener's filter is disabled and would send nothing anyway.
func TestOrdinaryRouteNeverReachesAnEPP(t *testing.T) {
	gw := gateway(
		seedGateway().Listeners[0].Routes[0],
		httpRoute("web", "site", []string{"www.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 1, Service: svc("web", "site", 8080)}}}),
		// A rule mixing a Service and a pool: only the pool's share calls
		// the EPP.
		httpRoute("web", "mixed", []string{"mixed.example.com"}, model.Rule{Backends: []model.Backend{
			{Weight: 1, Service: svc("web", "site", 8080)}, {Weight: 1, Pool: seedPool()},
		}}),
	)
	res := build(t, gw, seedInputs(), inferenceOn)

	site := routesOf(t, res, "http.80", "www.example.com:80")[0]
	if per := extProcOf(t, site.TypedPerFilterConfig); per != nil {
		t.Errorf("Service route has an ext_proc config %v", per)
	}
	mixed := routesOf(t, res, "http.80", "mixed.example.com:80")[0]
	if per := extProcOf(t, mixed.TypedPerFilterConfig); per != nil {
		t.Errorf("mixed route has a route-level ext_proc config %v", per)
	}
	wc := mixed.GetRoute().GetWeightedClusters().GetClusters()
	if len(wc) != 2 || extProcOf(t, wc[0].TypedPerFilterConfig) != nil {
		t.Errorf("Service share of the mixed rule enables ext_proc: %v", wc)
	}
	assertEPPOverride(t, extProcOf(t, wc[1].TypedPerFilterConfig), seedEPPCluster, true)

	hcm := hcmOf(t, res, "0.0.0.0_80")
	var base *extprocv3.ExternalProcessor
	for _, f := range hcm.HttpFilters {
		if f.Name == FilterExtProc {
			if !f.Disabled {
				t.Error("listener ext_proc filter is not disabled")
			}
			base = &extprocv3.ExternalProcessor{}
			if err := f.GetTypedConfig().UnmarshalTo(base); err != nil {
				t.Fatal(err)
			}
		}
	}
	if base == nil {
		t.Fatal("no ext_proc filter on the listener")
	}
	assertInertBase(t, base)
}

// assertInertBase checks the listener-level ext_proc sends nothing and holds
// the envoy.lb metadata namespaces.
func assertInertBase(t *testing.T, base *extprocv3.ExternalProcessor) {
	t.Helper()
	pm := base.GetProcessingMode()
	if pm.GetRequestHeaderMode() != extprocv3.ProcessingMode_SKIP || pm.GetResponseHeaderMode() != extprocv3.ProcessingMode_SKIP ||
		pm.GetRequestBodyMode() != extprocv3.ProcessingMode_NONE || pm.GetResponseBodyMode() != extprocv3.ProcessingMode_NONE ||
		pm.GetRequestTrailerMode() != extprocv3.ProcessingMode_SKIP || pm.GetResponseTrailerMode() != extprocv3.ProcessingMode_SKIP {
		t.Errorf("base processing mode %v is not inert", pm)
	}
	mo := base.GetMetadataOptions()
	if got := mo.GetReceivingNamespaces().GetUntyped(); len(got) != 1 || got[0] != MetadataNamespaceLB {
		t.Errorf("receiving namespaces = %v, want [envoy.lb]", got)
	}
	if got := mo.GetForwardingNamespaces().GetUntyped(); len(got) != 1 || got[0] != MetadataNamespaceLB {
		t.Errorf("forwarding namespaces = %v, want [envoy.lb]", got)
	}
}
