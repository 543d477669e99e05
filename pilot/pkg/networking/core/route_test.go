// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

func backendTo(name string) []model.Backend {
	return []model.Backend{{Weight: 1, Service: svc("ns", name, 80)}}
}

// grpcBackendTo is backendTo a Service port that declares HTTP/2, as a
// GRPCRoute's backends must.
func grpcBackendTo(name string) []model.Backend {
	b := backendTo(name)
	b[0].Service.HTTP2 = true
	return b
}

// describe prints a route's match and cluster in one line, for order tests.
func describe(r *routev3.Route) string {
	m := r.Match
	var p string
	switch {
	case m.GetPath() != "":
		p = "=" + m.GetPath()
	case m.GetPathSeparatedPrefix() != "":
		p = m.GetPathSeparatedPrefix() + "/*"
	case m.GetSafeRegex() != nil:
		p = "~" + m.GetSafeRegex().GetRegex()
	default:
		p = m.GetPrefix() + "*"
	}
	return fmt.Sprintf("%s h%d q%d %s", p, len(m.Headers), len(m.QueryParameters), strings.TrimSuffix(strings.TrimPrefix(r.GetRoute().GetCluster(), "outbound|80||"), ".ns.svc.cluster.local"))
}

func TestRoutePrecedence(t *testing.T) {
	get := gwv1.HTTPMethodGet
	exact := gwv1.PathMatchExact
	regex := gwv1.PathMatchRegularExpression
	old := httpRoute("ns", "zz-old", nil,
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/v1")}}, Backends: backendTo("old")},
	)
	old.CreationTimestamp = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	r := httpRoute("ns", "main", nil,
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/")}}, Backends: backendTo("root")},
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/v1")}}, Backends: backendTo("v1")},
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &exact, Value: ptr.To("/v1/models")}}}}, Backends: backendTo("exact")},
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &regex, Value: ptr.To("/v[0-9]+/.*")}}}}, Backends: backendTo("regex")},
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{
			Path: prefixMatch("/v1/").Path, Method: &get,
		}}}, Backends: backendTo("v1-get")},
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{
			Path:    prefixMatch("/v1").Path,
			Headers: []gwv1.HTTPHeaderMatch{{Name: "X-A", Value: "1"}, {Name: "x-a", Value: "dup"}, {Name: "X-B", Value: "2"}},
		}}}, Backends: backendTo("v1-2h")},
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{
			Path:        prefixMatch("/v1").Path,
			Headers:     []gwv1.HTTPHeaderMatch{{Name: "X-A", Value: "1"}},
			QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "debug", Value: "1"}},
		}}}, Backends: backendTo("v1-1h1q")},
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{
			Path:    prefixMatch("/v1").Path,
			Headers: []gwv1.HTTPHeaderMatch{{Name: "X-A", Value: "1"}},
		}}}, Backends: backendTo("v1-1h")},
	)
	res := build(t, gateway(r, old), Inputs{}, Options{})
	var got []string
	for _, rt := range routesOf(t, res, "http.80", "*:80") {
		got = append(got, describe(rt))
	}
	want := []string{
		"=/v1/models h0 q0 exact",
		"~/v[0-9]+/.* h0 q0 regex",
		"/v1/* h1 q0 v1-get", // method match: one ":method" header matcher
		"/v1/* h2 q0 v1-2h",  // duplicate header name ignored
		"/v1/* h1 q1 v1-1h1q",
		"/v1/* h1 q0 v1-1h",
		"/v1/* h0 q0 old", // older route first among equals
		"/v1/* h0 q0 v1",
		"/* h0 q0 root",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("route order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestVirtualHostsFromListenerAndRouteHostnames(t *testing.T) {
	gw := &model.Gateway{Namespace: "ns", Name: "gw", Listeners: []model.Listener{
		{Name: "wild", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: "*.example.com", Routes: []*model.Route{
			httpRoute("ns", "a", []string{"a.example.com", "other.org"}, model.Rule{Backends: backendTo("a")}),
			httpRoute("ns", "any", nil, model.Rule{Backends: backendTo("any")}),
			httpRoute("ns", "none", []string{"other.org"}, model.Rule{Backends: backendTo("none")}),
		}},
	}}
	res := build(t, gw, Inputs{}, Options{})
	var got []string
	for _, vh := range res.Routes[0].VirtualHosts {
		got = append(got, fmt.Sprintf("%s%v:%d", vh.Name, vh.Domains, len(vh.Routes)))
	}
	if want := "[*.example.com:80[*.example.com]:1 a.example.com:80[a.example.com]:1]"; fmt.Sprint(got) != want {
		t.Errorf("virtual hosts %v, want %s", got, want)
	}
	// The route that attaches through no hostname has no cluster either.
	for _, c := range res.Clusters {
		if strings.Contains(c.Name, "none.") {
			t.Errorf("cluster %s of an unattached route", c.Name)
		}
	}
}

func TestRouteMatches(t *testing.T) {
	regex := gwv1.HeaderMatchRegularExpression
	qregex := gwv1.QueryParamMatchRegularExpression
	post := gwv1.HTTPMethodPost
	m, err := httpMatch(&gwv1.HTTPRouteMatch{
		Path:        prefixMatch("/api/").Path,
		Headers:     []gwv1.HTTPHeaderMatch{{Name: "X-Model", Type: &regex, Value: "llama.*"}},
		QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "v", Type: &qregex, Value: "[0-9]+"}},
		Method:      &post,
	})
	if err != nil {
		t.Fatal(err)
	}
	rm := m.match
	if rm.GetPathSeparatedPrefix() != "/api" || m.prefix != "/api" {
		t.Errorf("path %v", rm)
	}
	if len(rm.Headers) != 2 || rm.Headers[0].Name != "x-model" || rm.Headers[0].GetStringMatch().GetSafeRegex().GetRegex() != "llama.*" ||
		rm.Headers[1].Name != ":method" || rm.Headers[1].GetStringMatch().GetExact() != "POST" {
		t.Errorf("headers %v", rm.Headers)
	}
	if len(rm.QueryParameters) != 1 || rm.QueryParameters[0].GetStringMatch().GetSafeRegex().GetRegex() != "[0-9]+" {
		t.Errorf("query %v", rm.QueryParameters)
	}
	if err := rm.ValidateAll(); err != nil {
		t.Error(err)
	}
	if _, err := httpMatch(&gwv1.HTTPRouteMatch{Headers: []gwv1.HTTPHeaderMatch{{Name: "a", Type: &regex, Value: "("}}}); err == nil {
		t.Error("bad regex: no error")
	}

	for _, tc := range []struct {
		svc, method string
		typ         gwv1.GRPCMethodMatchType
		want        string
	}{
		{"pkg.Svc", "Do", gwv1.GRPCMethodMatchExact, "path:/pkg.Svc/Do"},
		{"pkg.Svc", "", gwv1.GRPCMethodMatchExact, "prefix:/pkg.Svc/"},
		{"", "Do", gwv1.GRPCMethodMatchExact, `regex:/[^/]+/Do`},
		{"pkg\\..*", "Do", gwv1.GRPCMethodMatchRegularExpression, `regex:/pkg\..*/Do`},
	} {
		mm := &gwv1.GRPCMethodMatch{Type: &tc.typ}
		if tc.svc != "" {
			mm.Service = ptr.To(tc.svc)
		}
		if tc.method != "" {
			mm.Method = ptr.To(tc.method)
		}
		m, err := grpcMatch(&gwv1.GRPCRouteMatch{Method: mm})
		if err != nil {
			t.Fatal(err)
		}
		var got string
		switch {
		case m.match.GetPath() != "":
			got = "path:" + m.match.GetPath()
		case m.match.GetSafeRegex() != nil:
			got = "regex:" + m.match.GetSafeRegex().GetRegex()
		default:
			got = "prefix:" + m.match.GetPrefix()
		}
		if got != tc.want {
			t.Errorf("gRPC %s/%s %s: %s, want %s", tc.svc, tc.method, tc.typ, got, tc.want)
		}
	}
}

func TestRouteTimeout(t *testing.T) {
	d := gwv1.Duration("90s")
	gw := gateway(
		httpRoute("ns", "slow", []string{"slow.example.com"}, model.Rule{HTTP: &gwv1.HTTPRouteRule{Timeouts: &gwv1.HTTPRouteTimeouts{Request: &d}}, Backends: backendTo("a")}),
		httpRoute("ns", "stream", []string{"stream.example.com"}, model.Rule{Backends: backendTo("a")}),
		httpRoute("ns", "backend", []string{"backend.example.com"}, model.Rule{HTTP: &gwv1.HTTPRouteRule{Timeouts: &gwv1.HTTPRouteTimeouts{Request: &d, BackendRequest: ptr.To(gwv1.Duration("500ms"))}}, Backends: backendTo("a")}),
		httpRoute("ns", "alone", []string{"alone.example.com"}, model.Rule{HTTP: &gwv1.HTTPRouteRule{Timeouts: &gwv1.HTTPRouteTimeouts{BackendRequest: ptr.To(gwv1.Duration("500ms"))}}, Backends: backendTo("a")}),
		httpRoute("ns", "nobackend", []string{"nobackend.example.com"}, model.Rule{HTTP: &gwv1.HTTPRouteRule{Timeouts: &gwv1.HTTPRouteTimeouts{BackendRequest: ptr.To(gwv1.Duration("0s"))}}, Backends: backendTo("a")}),
	)
	res := build(t, gw, Inputs{}, Options{})
	slow := routesOf(t, res, "http.80", "slow.example.com:80")[0].GetRoute()
	if got := slow.GetTimeout(); got == nil || got.AsDuration() != 90*time.Second {
		t.Errorf("timeouts.request 90s → timeout %v", got)
	}
	// The bound that also covers a request held by ext_proc (a hung EPP).
	if got := slow.GetMaxStreamDuration(); got.GetMaxStreamDuration().AsDuration() != 90*time.Second ||
		got.GetGrpcTimeoutHeaderMax() != nil || got.GetGrpcTimeoutHeaderOffset() != nil {
		t.Errorf("timeouts.request 90s → max_stream_duration %v, want only max_stream_duration 90s", got)
	}
	// No timeout set: explicitly 0s, not Envoy's 15 s default, and no
	// stream duration limit.
	stream := routesOf(t, res, "http.80", "stream.example.com:80")[0].GetRoute()
	if got := stream.GetTimeout(); got == nil || got.AsDuration() != 0 {
		t.Errorf("no timeout → %v, want an explicit 0s", got)
	}
	if stream.GetMaxStreamDuration() != nil {
		t.Errorf("no timeout → max_stream_duration %v, want none", stream.GetMaxStreamDuration())
	}
	// With timeouts.request too, Envoy would ignore RouteAction.timeout
	// (max_stream_duration present): timeouts.backendRequest becomes the
	// per_try_timeout of a policy without retries.
	backend := routesOf(t, res, "http.80", "backend.example.com:80")[0].GetRoute()
	if got := backend.GetRetryPolicy(); got.GetPerTryTimeout().AsDuration() != 500*time.Millisecond || got.GetNumRetries() == nil || got.GetNumRetries().GetValue() != 0 || got.GetRetryOn() != "" {
		t.Errorf("timeouts.backendRequest 500ms with request 90s → retry_policy %v, want per_try_timeout 500ms, num_retries 0", got)
	}
	if got := backend.GetMaxStreamDuration().GetMaxStreamDuration(); got.AsDuration() != 90*time.Second {
		t.Errorf("timeouts.request 90s with backendRequest → max_stream_duration %v, want 90s", got)
	}
	alone := routesOf(t, res, "http.80", "alone.example.com:80")[0].GetRoute()
	if got := alone.GetTimeout(); got.AsDuration() != 500*time.Millisecond || alone.GetRetryPolicy() != nil || alone.GetMaxStreamDuration() != nil {
		t.Errorf("timeouts.backendRequest 500ms alone → timeout %v, retry_policy %v; want the router's timeout 500ms", got, alone.GetRetryPolicy())
	}
	nb := routesOf(t, res, "http.80", "nobackend.example.com:80")[0].GetRoute()
	if got := nb.GetTimeout(); got == nil || got.AsDuration() != 0 || nb.GetMaxStreamDuration() != nil {
		t.Errorf("timeouts.backendRequest 0s → timeout %v, max_stream_duration %v; want an explicit 0s and none", got, nb.GetMaxStreamDuration())
	}
}

// HTTPRoute retry as Envoy's RetryPolicy: connection errors and resets
// always, the listed codes through retriable-status-codes, attempts as
// num_retries, backoff as the back-off base; with timeouts.backendRequest
// the per-attempt bound.
func TestRouteRetry(t *testing.T) {
	retry := &gwv1.HTTPRouteRetry{Codes: []gwv1.HTTPRouteRetryStatusCode{500, 503}, Attempts: ptr.To(3), Backoff: ptr.To(gwv1.Duration("100ms"))}
	gw := gateway(
		httpRoute("ns", "r", []string{"r.example.com"}, model.Rule{HTTP: &gwv1.HTTPRouteRule{Retry: retry}, Backends: backendTo("a")}),
		httpRoute("ns", "t", []string{"t.example.com"}, model.Rule{HTTP: &gwv1.HTTPRouteRule{Retry: &gwv1.HTTPRouteRetry{}, Timeouts: &gwv1.HTTPRouteTimeouts{BackendRequest: ptr.To(gwv1.Duration("2s"))}}, Backends: backendTo("a")}),
	)
	res := build(t, gw, Inputs{}, Options{})
	want := &routev3.RetryPolicy{RetryOn: "connect-failure,reset,retriable-status-codes", RetriableStatusCodes: []uint32{500, 503},
		NumRetries: wrapperspb.UInt32(3), RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(100 * time.Millisecond)}}
	if got := routesOf(t, res, "http.80", "r.example.com:80")[0].GetRoute().GetRetryPolicy(); !proto.Equal(got, want) {
		t.Errorf("retry_policy %v, want %v", got, want)
	}
	want = &routev3.RetryPolicy{RetryOn: "connect-failure,reset,retriable-status-codes", PerTryTimeout: durationpb.New(2 * time.Second)}
	tr := routesOf(t, res, "http.80", "t.example.com:80")[0].GetRoute()
	if got := tr.GetRetryPolicy(); !proto.Equal(got, want) || tr.GetTimeout().AsDuration() != 0 {
		t.Errorf("retry with backendRequest 2s: retry_policy %v timeout %v, want %v and no route timeout", got, tr.GetTimeout(), want)
	}
}

func TestRouteFilters(t *testing.T) {
	rewriteRule := &gwv1.HTTPRouteRule{
		Matches: []gwv1.HTTPRouteMatch{prefixMatch("/old")},
		Filters: []gwv1.HTTPRouteFilter{
			{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{
				Hostname: ptr.To(gwv1.PreciseHostname("new.example.com")),
				Path:     &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("/")},
			}},
			{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{
				BackendRef: gwv1.BackendObjectReference{Name: "shadow", Port: ptr.To(gwv1.PortNumber(8080))},
				Percent:    ptr.To(int32(10)),
			}},
			{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{
				Add: []gwv1.HTTPHeader{{Name: "X-Served-By", Value: "gw"}}, Remove: []string{"Server"},
			}},
		},
	}
	redirectRule := &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{
		Scheme: ptr.To("https"), StatusCode: ptr.To(301),
	}}}}
	extRule := &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwv1.LocalObjectReference{Name: "x"}}}}
	gw := gateway(
		httpRoute("ns", "rw", []string{"rw.example.com"}, model.Rule{HTTP: rewriteRule, Backends: backendTo("a")}),
		httpRoute("ns", "redir", []string{"redir.example.com"}, model.Rule{HTTP: redirectRule}),
		httpRoute("ns", "ext", []string{"ext.example.com"}, model.Rule{HTTP: extRule, Backends: backendTo("a")}),
	)
	res := build(t, gw, Inputs{}, Options{})

	rw := routesOf(t, res, "http.80", "rw.example.com:80")[0]
	ra := rw.GetRoute()
	if ra.GetHostRewriteLiteral() != "new.example.com" || ra.GetRegexRewrite().GetSubstitution() != "/" || ra.GetRegexRewrite().GetPattern().GetRegex() != `^/old/*` {
		t.Errorf("rewrite %v", ra)
	}
	if len(ra.RequestMirrorPolicies) != 1 || ra.RequestMirrorPolicies[0].Cluster != "outbound|8080||shadow.ns.svc.cluster.local" ||
		ra.RequestMirrorPolicies[0].GetRuntimeFraction().GetDefaultValue().GetNumerator() != 10 {
		t.Errorf("mirror %v", ra.RequestMirrorPolicies)
	}
	clusterNamed(t, res, "outbound|8080||shadow.ns.svc.cluster.local")
	if len(rw.ResponseHeadersToAdd) != 1 || len(rw.ResponseHeadersToRemove) != 1 || rw.ResponseHeadersToRemove[0] != "server" {
		t.Errorf("response headers %v / %v", rw.ResponseHeadersToAdd, rw.ResponseHeadersToRemove)
	}

	rd := routesOf(t, res, "http.80", "redir.example.com:80")[0].GetRedirect()
	if rd.GetSchemeRedirect() != "https" || rd.GetResponseCode() != routev3.RedirectAction_MOVED_PERMANENTLY || rd.GetPortRedirect() != 0 {
		t.Errorf("redirect %v", rd)
	}
	if got := routesOf(t, res, "http.80", "ext.example.com:80")[0].GetDirectResponse().GetStatus(); got != 500 {
		t.Errorf("unsupported filter: status %d, want 500", got)
	}
}

func TestInvalidBackendsGet500(t *testing.T) {
	gw := gateway(
		httpRoute("ns", "none", []string{"none.example.com"}, model.Rule{}),
		httpRoute("ns", "bad", []string{"bad.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 1, Invalid: "backend not found"}}}),
		httpRoute("ns", "zero", []string{"zero.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 0, Service: svc("ns", "a", 80)}}}),
		httpRoute("ns", "noepp", []string{"noepp.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 1, Pool: func() *model.PoolBackend {
			p := seedPool()
			p.EPP = nil
			return p
		}()}}}),
		httpRoute("ns", "mixed", []string{"mixed.example.com"}, model.Rule{Backends: []model.Backend{
			{Weight: 3, Service: svc("ns", "a", 80)}, {Weight: 1, Invalid: "x"}, {Weight: 1, Invalid: "y"},
		}}),
	)
	res := build(t, gw, Inputs{}, inferenceOn)
	for _, h := range []string{"none", "bad", "zero", "noepp"} {
		if got := routesOf(t, res, "http.80", h+".example.com:80")[0].GetDirectResponse().GetStatus(); got != 500 {
			t.Errorf("%s: status %d, want direct response 500", h, got)
		}
	}
	ra := routesOf(t, res, "http.80", "mixed.example.com:80")[0].GetRoute()
	wc := ra.GetWeightedClusters().GetClusters()
	if len(wc) != 2 || wc[1].Name != InvalidBackendCluster || wc[1].GetWeight().GetValue() != 2 || wc[0].GetWeight().GetValue() != 3 {
		t.Errorf("weighted clusters %v", wc)
	}
	if ra.ClusterNotFoundResponseCode != routev3.RouteAction_INTERNAL_SERVER_ERROR {
		t.Errorf("cluster_not_found_response_code %v", ra.ClusterNotFoundResponseCode)
	}
}

func TestRedirectPortAndPrefix(t *testing.T) {
	for _, tc := range []struct {
		name     string
		f        gwv1.HTTPRequestRedirectFilter
		prefix   string
		port     uint32
		wantPort uint32
		wantPath string
	}{
		{name: "listener port kept", port: 8080, wantPort: 8080},
		{name: "well-known port left out", port: 80},
		// A scheme without a port means that scheme's well-known port; with
		// no hostname it is written, or Envoy would keep the request's
		// Host port (:8080).
		{name: "scheme change, no hostname: well-known port written", f: gwv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https")}, port: 8080, wantPort: 443},
		{name: "scheme change with hostname: well-known port left out", f: gwv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https"), Hostname: ptr.To(gwv1.PreciseHostname("example.org"))}, port: 8080},
		{name: "port 80 given on 8080, no hostname: written", f: gwv1.HTTPRequestRedirectFilter{Port: ptr.To(gwv1.PortNumber(80))}, port: 8080, wantPort: 80},
		{name: "explicit port", f: gwv1.HTTPRequestRedirectFilter{Port: ptr.To(gwv1.PortNumber(9443))}, port: 80, wantPort: 9443},
		{name: "prefix trailing slash", f: gwv1.HTTPRequestRedirectFilter{Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("/bar/")}},
			prefix: "/foo", port: 80, wantPath: "prefix:/bar"},
		{name: "prefix to root", f: gwv1.HTTPRequestRedirectFilter{Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("/")}},
			prefix: "/foo", port: 80, wantPath: "regex:^/foo/*"},
		{name: "root to root", f: gwv1.HTTPRequestRedirectFilter{Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("")}},
			prefix: "/", port: 80},
	} {
		ra, err := redirectAction(&tc.f, tc.prefix, tc.port, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ra.PortRedirect != tc.wantPort {
			t.Errorf("%s: port_redirect %d, want %d", tc.name, ra.PortRedirect, tc.wantPort)
		}
		var path string
		switch {
		case ra.GetRegexRewrite() != nil:
			path = "regex:" + ra.GetRegexRewrite().GetPattern().GetRegex()
		case ra.GetPathRewriteSpecifier() != nil:
			path = "prefix:" + ra.GetPrefixRewrite()
		}
		if path != tc.wantPath {
			t.Errorf("%s: path rewrite %q, want %q", tc.name, path, tc.wantPath)
		}
		if err := ra.ValidateAll(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// GRPCRoute rules are ordered by the characters of the matching service,
// then of the method (Gateway API GRPCRouteRule precedence), whatever the
// match type: a service-only match wins over a method-only one.
func TestGRPCRoutePrecedence(t *testing.T) {
	svcOnly := &gwv1.GRPCMethodMatch{Service: ptr.To("helloworld.Greeter")}
	methodOnly := &gwv1.GRPCMethodMatch{Method: ptr.To("SayHello")}
	both := &gwv1.GRPCMethodMatch{Service: ptr.To("helloworld.Greeter"), Method: ptr.To("SayHello")}
	rule := func(m *gwv1.GRPCMethodMatch, backend string) model.Rule {
		return model.Rule{GRPC: &gwv1.GRPCRouteRule{Matches: []gwv1.GRPCRouteMatch{{Method: m}}}, Backends: grpcBackendTo(backend)}
	}
	r := httpRoute("ns", "grpc", nil, rule(methodOnly, "method"), rule(svcOnly, "service"), rule(both, "both"), rule(nil, "any"))
	r.Kind = "GRPCRoute"
	res := build(t, gateway(r), Inputs{}, Options{})
	var got []string
	for _, rt := range routesOf(t, res, "http.80", "*:80") {
		got = append(got, describe(rt))
	}
	want := []string{"both", "service", "method", "any"}
	for i, w := range want {
		if i >= len(got) || !strings.HasSuffix(got[i], " "+w) {
			t.Fatalf("route order:\n%s\nwant backends in order %v", strings.Join(got, "\n"), want)
		}
	}
}
