// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

func authzRoute(name string, rule model.Rule) *model.Route {
	if rule.HTTP == nil {
		rule.HTTP = &gwv1.HTTPRouteRule{}
		for range rule.ExternalAuth {
			rule.HTTP.Filters = append(rule.HTTP.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterExternalAuth, ExternalAuth: &gwv1.HTTPExternalAuthFilter{}})
		}
	}
	return &model.Route{Kind: "HTTPRoute", Namespace: "ns", Name: name, Hostnames: []string{name + ".example.com"},
		CreationTimestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Rules: []model.Rule{rule}}
}

// ExternalAuth in Envoy's terms: one disabled ext_authz filter per
// distinct configuration, after CORS and before ext_proc, enabled per route
// by ExtAuthzPerRoute; the authorization server's cluster; a rule whose
// ExternalAuth did not resolve, or whose written filters were not resolved
// into the model, answers 500; a backendRef's ExternalAuth makes its share
// 500 rather than skip it; the whole set passes Validate.
func TestExtAuthzTranslation(t *testing.T) {
	svcA := model.Backend{Weight: 1, Service: &model.ServiceBackend{Host: "a.ns.svc.cluster.local", Port: 80}}
	grpcAuth := &model.ExternalAuth{Protocol: gwv1.HTTPRouteExternalAuthGRPCProtocol,
		Service: &model.ServiceBackend{Host: "authz.ns.svc.cluster.local", Port: 9000, HTTP2: true}, AllowedRequestHeaders: []string{"x-user"}, MaxRequestBytes: 100}
	httpAuth := &model.ExternalAuth{Protocol: gwv1.HTTPRouteExternalAuthHTTPProtocol,
		Service: &model.ServiceBackend{Host: "authz.ns.svc.cluster.local", Port: 8000}, PathPrefix: "/check"}
	sameAsGRPC := *grpcAuth
	gw := &model.Gateway{Namespace: "gw", Name: "gw", Listeners: []model.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Routes: []*model.Route{
		authzRoute("grpc", model.Rule{Backends: []model.Backend{svcA}, ExternalAuth: []*model.ExternalAuth{grpcAuth}}),
		authzRoute("grpc2", model.Rule{Backends: []model.Backend{svcA}, ExternalAuth: []*model.ExternalAuth{&sameAsGRPC}}),
		authzRoute("http", model.Rule{Backends: []model.Backend{svcA}, ExternalAuth: []*model.ExternalAuth{httpAuth}}),
		authzRoute("invalid", model.Rule{Backends: []model.Backend{svcA}, ExternalAuth: []*model.ExternalAuth{{Protocol: gwv1.HTTPRouteExternalAuthGRPCProtocol, Invalid: "no"}}}),
		authzRoute("unresolved", model.Rule{HTTP: &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterExternalAuth,
			ExternalAuth: &gwv1.HTTPExternalAuthFilter{}}}}, Backends: []model.Backend{svcA}}),
		authzRoute("share", model.Rule{Backends: []model.Backend{{Weight: 1, Service: svcA.Service, HTTPFilters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterExternalAuth, ExternalAuth: &gwv1.HTTPExternalAuthFilter{}}}}}}),
	}}}}
	res, err := BuildGateway(gw, Inputs{}, Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := res.Listeners[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range hcm.GetHttpFilters() {
		names = append(names, f.GetName())
	}
	gName, hName := ExtAuthzFilterName(grpcAuth), ExtAuthzFilterName(httpAuth)
	authz := []string{gName, hName}
	slices.Sort(authz)
	if want := append(append([]string{FilterCORS}, authz...), FilterExtProc, FilterRouter); !slices.Equal(names, want) {
		t.Fatalf("HTTP filters %v, want %v (one per distinct ExternalAuth, between CORS and ext_proc)", names, want)
	}
	for _, f := range hcm.GetHttpFilters()[1:3] {
		var c extauthzv3.ExtAuthz
		if err := f.GetTypedConfig().UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		if !f.GetDisabled() || c.GetFailureModeAllow() || c.GetStatusOnError().GetCode() != ExtAuthzStatusOnError ||
			!c.GetDecoderHeaderMutationRules().GetDisallowSystem().GetValue() {
			t.Fatalf("%s: disabled=%v config %v", f.GetName(), f.GetDisabled(), &c)
		}
		switch f.GetName() {
		case gName:
			if c.GetGrpcService().GetEnvoyGrpc().GetClusterName() != "outbound|9000||authz.ns.svc.cluster.local" ||
				c.GetAllowedHeaders().GetPatterns()[0].GetExact() != "x-user" || c.GetWithRequestBody().GetMaxRequestBytes() != 100 ||
				c.GetWithRequestBody().GetAllowPartialMessage() {
				t.Fatalf("gRPC filter %v", &c)
			}
		case hName:
			hs := c.GetHttpService()
			if hs.GetServerUri().GetCluster() != "outbound|8000||authz.ns.svc.cluster.local" || hs.GetPathPrefix() != "/check" ||
				hs.GetAuthorizationResponse().GetAllowedUpstreamHeaders().GetPatterns()[0].GetSafeRegex() == nil {
				t.Fatalf("HTTP filter %v", &c)
			}
		}
	}
	routes := map[string]*routev3.Route{}
	for _, vh := range res.Routes[0].GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			routes[strings.Split(r.GetName(), ".")[1]] = r
		}
	}
	for name, filter := range map[string]string{"grpc": gName, "grpc2": gName, "http": hName} {
		r := routes[name]
		if r.GetRoute() == nil || r.GetTypedPerFilterConfig()[filter] == nil {
			t.Fatalf("route %s: %v, want it forwarded with %s enabled", name, r, filter)
		}
	}
	for _, name := range []string{"invalid", "unresolved"} {
		if routes[name].GetDirectResponse().GetStatus() != 500 {
			t.Fatalf("route %s: %v, want a direct 500", name, routes[name])
		}
	}
	if routes["share"].GetRoute().GetCluster() != "" {
		t.Fatalf("a backendRef's ExternalAuth was skipped: %v", routes["share"])
	}
	clusters := map[string]bool{}
	for _, c := range res.Clusters {
		clusters[c.GetName()] = true
	}
	if !clusters["outbound|9000||authz.ns.svc.cluster.local"] || !clusters["outbound|8000||authz.ns.svc.cluster.local"] {
		t.Fatalf("clusters %v lack the authorization servers'", clusters)
	}
}

// complementRegex matches, in full, every header name but the excluded
// ones and ":"-prefixed ones.
func TestExtAuthzUpstreamHeadersRegex(t *testing.T) {
	re := regexp.MustCompile("^" + complementRegex(ExtAuthzNotCopied, ":") + "$")
	for _, n := range ExtAuthzNotCopied {
		if re.MatchString(n) {
			t.Errorf("%q matched", n)
		}
	}
	for _, n := range []string{":status", ":authority", ""} {
		if re.MatchString(n) {
			t.Errorf("%q matched", n)
		}
	}
	for _, n := range []string{"x-user", "content", "content-lengthy", "hos", "hosts", "t", "tea", "te-x", "authorization", "set-cookie", "x-ext-authz-check-result"} {
		if !re.MatchString(n) {
			t.Errorf("%q not matched", n)
		}
	}
	if err := checkRegex(complementRegex(ExtAuthzNotCopied, ":")); err != nil {
		t.Fatalf("the bootstrap's RE2 limit refuses it: %v", err)
	}
}
