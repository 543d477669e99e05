// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"slices"
	"testing"
	"time"

	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	earlyhmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// processor is an ExternalProcessor in namespace ns whose Service is
// name:9004, request headers and body FULL_DUPLEX_STREAMED (GIE's
// body-based router with --streaming).
func processor(ns, name string, failOpen bool) *model.ExternalProcessor {
	return &model.ExternalProcessor{Namespace: ns, Name: name, Host: name + "." + ns + ".svc.cluster.local", Port: 9004,
		RequestHeaders: true, RequestBodyStreamed: true, FailOpen: failOpen}
}

func extRef(p *model.ExternalProcessor) model.ListenerFilter {
	return model.ListenerFilter{Type: gwv1.ListenerFilterExtensionRef, Processor: p}
}

// twoTenantGateway has two HTTP listeners on port 80: "a" for
// a.example.com with the given filters, "b" for b.example.com without
// any, each with a route to a pool.
func twoTenantGateway(filters ...model.ListenerFilter) *model.Gateway {
	ra := httpRoute("team-a", "ra", nil, model.Rule{Backends: []model.Backend{{Weight: 1, Pool: pool("team-a", "pool-a", "FailClose")}}})
	rb := httpRoute("team-b", "rb", nil, model.Rule{Backends: []model.Backend{{Weight: 1, Pool: pool("team-b", "pool-b", "FailClose")}}})
	return &model.Gateway{Namespace: "gw", Name: "gw", Listeners: []model.Listener{
		{Name: "a", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: "a.example.com", Routes: []*model.Route{ra}, Filters: filters},
		{Name: "b", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: "b.example.com", Routes: []*model.Route{rb}},
	}}
}

func hcmFilterNames(h *hcmv3.HttpConnectionManager) []string {
	var out []string
	for _, f := range h.HttpFilters {
		out = append(out, f.Name)
	}
	return out
}

func vhostNamed(t *testing.T, res Resources, rc, name string) *routev3.VirtualHost {
	t.Helper()
	for _, c := range res.Routes {
		if c.Name != rc {
			continue
		}
		for _, v := range c.VirtualHosts {
			if v.Name == name {
				return v
			}
		}
	}
	t.Fatalf("no virtual host %q in route configuration %q", name, rc)
	return nil
}

// Listener filters become HTTP filters ahead of every other, in the
// listener's order, each disabled and enabled only on the virtual hosts
// of its own listener, whose last route is the 404 catch-all; the other
// tenant's virtual host gets neither.
func TestListenerFiltersOnlyOnTheirListener(t *testing.T) {
	bbr, second := processor("gw", "bbr", false), processor("gw", "second", true)
	second.MessageTimeout = 3 * time.Second
	res := build(t, twoTenantGateway(extRef(bbr), extRef(second)), Inputs{}, inferenceOn)

	h := hcmOf(t, res, ListenerName(80))
	want := []string{ListenerFilterName("a", 0), ListenerFilterName("a", 1), FilterCORS, FilterExtProc, FilterRouter}
	if got := hcmFilterNames(h); !slices.Equal(got, want) {
		t.Fatalf("HTTP filters %v, want %v", got, want)
	}
	for i, p := range []*model.ExternalProcessor{bbr, second} {
		hf := h.HttpFilters[i]
		if !hf.Disabled {
			t.Errorf("%s is enabled in the connection manager: it would run on listener b's requests", hf.Name)
		}
		cfg := &extprocv3.ExternalProcessor{}
		if err := hf.GetTypedConfig().UnmarshalTo(cfg); err != nil {
			t.Fatal(err)
		}
		if got := cfg.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != ProcessorClusterName(p) {
			t.Errorf("%s calls %q, want %q", hf.Name, got, ProcessorClusterName(p))
		}
		if cfg.RouteCacheAction != extprocv3.ExternalProcessor_CLEAR {
			t.Errorf("%s route_cache_action %v, want CLEAR (route selection after the filter)", hf.Name, cfg.RouteCacheAction)
		}
		wantRules := &mutationrulesv3.HeaderMutationRules{}
		wantRules.AllowAllRouting, wantRules.AllowEnvoy, wantRules.DisallowIsError = wrapperspb.Bool(false), wrapperspb.Bool(false), wrapperspb.Bool(false)
		if d := cmp.Diff(wantRules, cfg.MutationRules, protocmp.Transform()); d != "" {
			t.Errorf("%s mutation_rules (-want +got):\n%s", hf.Name, d)
		}
		if cfg.ProcessingMode.GetRequestHeaderMode() != extprocv3.ProcessingMode_SKIP || cfg.ProcessingMode.GetRequestBodyMode() != extprocv3.ProcessingMode_NONE {
			t.Errorf("%s base processing mode %v, want inert", hf.Name, cfg.ProcessingMode)
		}
		if len(cfg.GetMetadataOptions().GetReceivingNamespaces().GetUntyped()) > 0 {
			t.Errorf("%s receives metadata %v: a listener filter must not set the EPP's pick", hf.Name, cfg.GetMetadataOptions())
		}
		if (i == 1) != (cfg.MessageTimeout != nil) || (i == 1 && cfg.MessageTimeout.AsDuration() != 3*time.Second) {
			t.Errorf("%s message_timeout %v", hf.Name, cfg.MessageTimeout)
		}
	}
	if h.HttpFilters[3].Disabled {
		t.Error("the EPP's ext_proc is disabled in a connection manager with listener filters: a pool route found after a filter changed the request would skip its EPP")
	}

	va := vhostNamed(t, res, RouteConfigName(80, false), "a.example.com:80")
	if len(va.TypedPerFilterConfig) != 2 {
		t.Fatalf("a.example.com typed_per_filter_config %v, want both filters", va.TypedPerFilterConfig)
	}
	for i, p := range []*model.ExternalProcessor{bbr, second} {
		per := &extprocv3.ExtProcPerRoute{}
		if err := va.TypedPerFilterConfig[ListenerFilterName("a", i)].UnmarshalTo(per); err != nil {
			t.Fatal(err)
		}
		o := per.GetOverrides()
		if o.GetFailureModeAllow().GetValue() != p.FailOpen {
			t.Errorf("filter %d failure_mode_allow %v, want %v", i, o.GetFailureModeAllow(), p.FailOpen)
		}
		pm := o.GetProcessingMode()
		if pm.GetRequestHeaderMode() != extprocv3.ProcessingMode_SEND || pm.GetRequestBodyMode() != extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED ||
			pm.GetRequestTrailerMode() != extprocv3.ProcessingMode_SEND || pm.GetResponseHeaderMode() != extprocv3.ProcessingMode_SKIP ||
			pm.GetResponseBodyMode() != extprocv3.ProcessingMode_NONE || pm.GetResponseTrailerMode() != extprocv3.ProcessingMode_SKIP {
			t.Errorf("filter %d processing mode %v", i, pm)
		}
	}
	last := va.Routes[len(va.Routes)-1]
	if last.Name != ListenerFilterFallbackRoute || last.GetDirectResponse().GetStatus() != 404 || last.GetMatch().GetPrefix() != "/" {
		t.Errorf("a.example.com's last route %v, want the 404 catch-all", last)
	}
	vb := vhostNamed(t, res, RouteConfigName(80, false), "b.example.com:80")
	if len(vb.TypedPerFilterConfig) != 0 || slices.ContainsFunc(vb.Routes, func(r *routev3.Route) bool { return r.Name == ListenerFilterFallbackRoute }) {
		t.Errorf("listener b's virtual host carries listener a's filters: %v", vb)
	}
	c := clusterNamed(t, res, ProcessorClusterName(bbr))
	if c.TypedExtensionProtocolOptions[HTTPProtocolOptionsKey] == nil {
		t.Errorf("processor cluster %s is not HTTP/2", c.Name)
	}
}

// The order of Listener.filters.requests is the order of the HTTP filters,
// whatever it is: InvalidListenerFilterOrder never applies.
func TestListenerFilterOrderKept(t *testing.T) {
	p1, p2, p3 := processor("gw", "p1", false), processor("gw", "p2", false), processor("gw", "p3", false)
	for _, order := range [][]*model.ExternalProcessor{{p1, p2, p3}, {p3, p1, p2}, {p2, p3, p1}} {
		var fs []model.ListenerFilter
		for _, p := range order {
			fs = append(fs, extRef(p))
		}
		res := build(t, twoTenantGateway(fs...), Inputs{}, inferenceOn)
		h := hcmOf(t, res, ListenerName(80))
		for i, p := range order {
			cfg := &extprocv3.ExternalProcessor{}
			if err := h.HttpFilters[i].GetTypedConfig().UnmarshalTo(cfg); err != nil {
				t.Fatal(err)
			}
			if got := cfg.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != ProcessorClusterName(p) {
				t.Errorf("order %v: HTTP filter %d calls %s, want %s", order, i, got, ProcessorClusterName(p))
			}
		}
	}
}

// A listener without hostname with filters gets a "*" virtual host with
// them; a listener hostname that "*" would catch gets its own virtual
// host without them, so its requests never run the other's filters.
func TestListenerFiltersOnCatchAllListener(t *testing.T) {
	bbr := processor("gw", "bbr", false)
	gw := &model.Gateway{Namespace: "gw", Name: "gw", Listeners: []model.Listener{
		{Name: "any", Port: 80, Protocol: gwv1.HTTPProtocolType, Filters: []model.ListenerFilter{extRef(bbr)}},
		{Name: "b", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: "b.example.com"},
	}}
	res := build(t, gw, Inputs{}, inferenceOn)
	star := vhostNamed(t, res, RouteConfigName(80, false), "*:80")
	if star.TypedPerFilterConfig[ListenerFilterName("any", 0)] == nil || star.Routes[len(star.Routes)-1].Name != ListenerFilterFallbackRoute {
		t.Errorf("the catch-all listener's virtual host %v lacks its filter", star)
	}
	vb := vhostNamed(t, res, RouteConfigName(80, false), "b.example.com:80")
	if len(vb.TypedPerFilterConfig) != 0 || len(vb.Routes) != 0 {
		t.Errorf("listener b's virtual host %v, want an empty one without filters", vb)
	}
}

// On an HTTPS port each listener has its own filter chain and connection
// manager: only that listener's filters are in it, and enabled on its own
// virtual hosts, never on the 421 one.
func TestListenerFiltersOnHTTPSChains(t *testing.T) {
	bbr := processor("gw", "bbr", false)
	tls := func(n string) *model.ListenerTLS { return &model.ListenerTLS{CertificateRefs: []string{"gw/" + n}} }
	gw := &model.Gateway{Namespace: "gw", Name: "gw", Listeners: []model.Listener{
		{Name: "a", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: "a.example.com", TLS: tls("a"), Filters: []model.ListenerFilter{extRef(bbr)}},
		{Name: "b", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: "b.example.com", TLS: tls("b")},
	}}
	res := build(t, gw, Inputs{}, inferenceOn)
	var l *listenerv3.Listener
	for _, x := range res.Listeners {
		if x.Name == ListenerName(443) {
			l = x
		}
	}
	for _, fc := range l.FilterChains {
		h := &hcmv3.HttpConnectionManager{}
		if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(h); err != nil {
			t.Fatal(err)
		}
		has := slices.Contains(hcmFilterNames(h), ListenerFilterName("a", 0))
		if has != (fc.Name == "a") {
			t.Errorf("chain %s: HTTP filters %v", fc.Name, hcmFilterNames(h))
		}
		if len(h.EarlyHeaderMutationExtensions) != 1 {
			t.Errorf("chain %s: early header mutations %v", fc.Name, h.EarlyHeaderMutationExtensions)
		}
	}
	va := vhostNamed(t, res, ChainRouteConfigName(443, "a"), "a.example.com:443")
	if va.TypedPerFilterConfig[ListenerFilterName("a", 0)] == nil {
		t.Errorf("chain a's own virtual host lacks its filter: %v", va)
	}
	for _, c := range res.Routes {
		for _, v := range c.VirtualHosts {
			if v.Name != "a.example.com:443" && len(v.TypedPerFilterConfig) > 0 {
				t.Errorf("%s virtual host %s carries listener filters", c.Name, v.Name)
			}
		}
	}
}

// Every connection manager removes a client's X-Gateway-Model-Name before
// anything else, with or without listener filters; without listener
// filters the EPP's filter stays disabled as before.
func TestClientModelNameHeaderRemoved(t *testing.T) {
	for _, gw := range []*model.Gateway{seedGateway(), twoTenantGateway(extRef(processor("gw", "bbr", false)))} {
		res := build(t, gw, seedInputs(), inferenceOn)
		h := hcmOf(t, res, ListenerName(80))
		if len(h.EarlyHeaderMutationExtensions) != 1 || h.EarlyHeaderMutationExtensions[0].Name != EarlyHeaderMutation {
			t.Fatalf("early header mutations %v", h.EarlyHeaderMutationExtensions)
		}
		m := &earlyhmv3.HeaderMutation{}
		if err := h.EarlyHeaderMutationExtensions[0].TypedConfig.UnmarshalTo(m); err != nil {
			t.Fatal(err)
		}
		if len(m.Mutations) != 1 || m.Mutations[0].GetRemove() != ModelNameHeader {
			t.Errorf("early header mutation %v, want the removal of %s", m, ModelNameHeader)
		}
	}
	h := hcmOf(t, build(t, seedGateway(), seedInputs(), inferenceOn), ListenerName(80))
	for _, f := range h.HttpFilters {
		if f.Name == FilterExtProc && !f.Disabled {
			t.Error("the EPP's filter is enabled without listener filters")
		}
	}
}

// The Translator's output for a Gateway with listener filters is the full
// builders', before and after a route and a filter change.
func TestTranslatorWithListenerFilters(t *testing.T) {
	tr := NewTranslator(inferenceOn)
	gw := twoTenantGateway(extRef(processor("gw", "bbr", false)))
	steps := []*model.Gateway{gw}
	g2 := *gw
	g2.Listeners = slices.Clone(gw.Listeners)
	g2.Listeners[0].Routes = append(slices.Clone(g2.Listeners[0].Routes),
		httpRoute("team-a", "rc", []string{"a.example.com"}, model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/v2")}},
			Backends: []model.Backend{{Weight: 1, Service: svc("team-a", "s", 80)}}}))
	steps = append(steps, &g2)
	g3 := g2
	g3.Listeners = slices.Clone(g2.Listeners)
	g3.Listeners[0].Filters = []model.ListenerFilter{extRef(processor("gw", "other", true))}
	steps = append(steps, &g3, gw)
	for i, g := range steps {
		got, err := tr.Build(g, Inputs{})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		want := build(t, g, Inputs{}, inferenceOn)
		want.Endpoints = nil
		if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
			t.Errorf("step %d: Translator differs from the full builders (-full +translator):\n%s", i, d)
		}
	}
}

// A listener whose filters do not resolve (model.Listener.FilterError)
// answers every request 500 on each of its virtual hosts, its own
// hostname's included, and carries no filter; the other tenant's listener
// on the port is untouched.
func TestListenerFilterErrorFailsClosed(t *testing.T) {
	gw := twoTenantGateway()
	gw.Listeners[0].FilterError = "filters.requests[0]: ExternalProcessor gw/bbr not found"
	res := build(t, gw, Inputs{}, inferenceOn)
	h := hcmOf(t, res, ListenerName(80))
	if got, want := hcmFilterNames(h), []string{FilterCORS, FilterExtProc, FilterRouter}; !slices.Equal(got, want) {
		t.Errorf("HTTP filters %v, want %v", got, want)
	}
	va := vhostNamed(t, res, RouteConfigName(80, false), "a.example.com:80")
	if len(va.Routes) != 1 || va.Routes[0].Name != ListenerFilterErrorRoute || va.Routes[0].GetDirectResponse().GetStatus() != 500 ||
		va.Routes[0].GetMatch().GetPrefix() != "/" || len(va.TypedPerFilterConfig) != 0 {
		t.Errorf("a.example.com %v, want only the 500 route", va)
	}
	vb := vhostNamed(t, res, RouteConfigName(80, false), "b.example.com:80")
	if len(vb.Routes) == 0 || vb.Routes[0].GetDirectResponse() != nil {
		t.Errorf("listener b's virtual host changed: %v", vb)
	}
}

// With listener filters a route that asks for ExternalAuth may be selected
// only after the filters changed the request, when Envoy has created the
// filters already: the ext_authz filters are then enabled in the
// connection manager, and every virtual host disables them unless its
// route enables one (more specific), so no check is skipped and none runs
// where no route asks.
func TestExtAuthzWithListenerFilters(t *testing.T) {
	auth := &model.ExternalAuth{Protocol: gwv1.HTTPRouteExternalAuthGRPCProtocol,
		Service: &model.ServiceBackend{Host: "authz.ns.svc.cluster.local", Port: 9000, HTTP2: true}}
	auth.Name = ExtAuthzFilterName(auth)
	gw := twoTenantGateway(extRef(processor("gw", "bbr", false)))
	ra := gw.Listeners[0].Routes[0]
	ra.Rules[0].ExternalAuth = []*model.ExternalAuth{auth}
	ra.Rules[0].HTTP = &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterExternalAuth, ExternalAuth: &gwv1.HTTPExternalAuthFilter{}}}}
	res := build(t, gw, Inputs{}, inferenceOn)
	h := hcmOf(t, res, ListenerName(80))
	name := extAuthzName(auth)
	i := slices.IndexFunc(h.HttpFilters, func(f *hcmv3.HttpFilter) bool { return f.Name == name })
	if i < 0 {
		t.Fatalf("no %s in %v", name, hcmFilterNames(h))
	}
	if h.HttpFilters[i].Disabled {
		t.Errorf("%s disabled in a connection manager with listener filters: a route found after the filters would skip its check", name)
	}
	for _, vh := range []string{"a.example.com:80", "b.example.com:80"} {
		v := vhostNamed(t, res, RouteConfigName(80, false), vh)
		per := &extauthzv3.ExtAuthzPerRoute{}
		if err := v.TypedPerFilterConfig[name].UnmarshalTo(per); err != nil || !per.GetDisabled() {
			t.Errorf("%s: %s per-filter config %v (%v), want disabled", vh, name, per, err)
		}
	}
	va := vhostNamed(t, res, RouteConfigName(80, false), "a.example.com:80")
	enabled := slices.ContainsFunc(va.Routes, func(r *routev3.Route) bool {
		a := r.TypedPerFilterConfig[name]
		per := &extauthzv3.ExtAuthzPerRoute{}
		return a != nil && a.UnmarshalTo(per) == nil && per.GetCheckSettings() != nil
	})
	if !enabled {
		t.Errorf("team-a's route does not enable %s: %v", name, va.Routes)
	}
}

// TestTranslatorFollowsProcessorChanges: the incremental Translator gives a
// changed route configuration when only a listener filter's processor
// changes (its failure mode lives in the virtual host's ExtProcPerRoute).
func TestTranslatorFollowsProcessorChanges(t *testing.T) {
	tr := NewTranslator(Options{InferenceEnabled: true})
	failOpen := func(res Resources) bool {
		vh := vhostNamed(t, res, RouteConfigName(80, false), "a.example.com:80")
		var pr extprocv3.ExtProcPerRoute
		if err := vh.TypedPerFilterConfig[ListenerFilterName("a", 0)].UnmarshalTo(&pr); err != nil {
			t.Fatal(err)
		}
		return pr.GetOverrides().GetFailureModeAllow().GetValue()
	}
	res, err := tr.Build(twoTenantGateway(extRef(processor("gw", "bbr", false))), Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	if failOpen(res) {
		t.Fatal("FailClose processor translated with failure_mode_allow")
	}
	res, err = tr.Build(twoTenantGateway(extRef(processor("gw", "bbr", true))), Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	if !failOpen(res) {
		t.Fatal("the processor changed to FailOpen, but the route configuration kept failure_mode_allow false")
	}
}
