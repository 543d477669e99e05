// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

func direct(body string) *routev3.Route_DirectResponse {
	return &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
		Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}},
	}}
}

func prefix(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

func toCluster(name string) *routev3.Route_Route {
	return &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}}
}

// rc is route configuration http.80 with vhosts, the Host's port ignored
// in virtual host selection as core writes it.
func rc(vhosts ...*routev3.VirtualHost) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: "http.80", VirtualHosts: vhosts, IgnorePortInHostMatching: true}
}

func edsCluster(t *testing.T, name string, http2 bool) *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
	}
	if http2 {
		a, err := anypb.New(&upstreamhttpv3.HttpProtocolOptions{UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptions: a}
	}
	return c
}

// overrideHostCluster is the shadow cluster as core builds it.
func overrideHostCluster(t *testing.T, name string) *clusterv3.Cluster {
	c := edsCluster(t, name, false)
	gwRes := seedClusters(t)
	for _, sc := range gwRes {
		if sc.GetLoadBalancingPolicy() != nil {
			c.LoadBalancingPolicy = sc.GetLoadBalancingPolicy()
		}
	}
	if c.LoadBalancingPolicy == nil {
		t.Fatal("core built no override_host cluster")
	}
	return c
}

func cla(name string, addrs ...string) *endpointv3.ClusterLoadAssignment {
	loc := &endpointv3.LocalityLbEndpoints{}
	for _, a := range addrs {
		h, p, _ := net.SplitHostPort(a)
		var port uint32
		fmt.Sscan(p, &port)
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: h, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}},
		}}})
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{loc}}
}

// Virtual hosts: exact, then the longest "*suffix", then the longest
// "prefix*", then "*"; the Host's port is left out of the match
// (ignore_port_in_host_matching, which rc sets). Routes: first match in
// order, path_separated_prefix matching whole segments, headers and query
// parameters; no route is a 404.
func TestRoutingPrecedence(t *testing.T) {
	dp := newTestDP(t, Options{})
	vh := func(name string, domains ...string) *routev3.VirtualHost {
		return &routev3.VirtualHost{Name: name, Domains: domains, Routes: []*routev3.Route{{Match: prefix("/"), Action: direct(name)}}}
	}
	routes := &routev3.VirtualHost{Name: "routes", Domains: []string{"routes.test"}, Routes: []*routev3.Route{
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/exact"}}, Action: direct("exact")},
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, Action: direct("api")},
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/v[0-9]+/.*"}}}, Action: direct("regex")},
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/h"}, Headers: []*routev3.HeaderMatcher{{
			Name: "x-test-h", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "yes"}}},
		}}}, Action: direct("header")},
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/q"}, QueryParameters: []*routev3.QueryParameterMatcher{{
			Name: "m", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "1"}}},
		}}}, Action: direct("query")},
		{Match: prefix("/p"), Action: direct("prefix")},
	}}
	load(t, dp, rc(vh("exact", "a.example.com"), vh("suffix", "*.example.com"), vh("longsuffix", "*.b.example.com"),
		vh("prefix", "a.*"), vh("star", "*"), routes), seedListener(t))
	for _, c := range []struct{ host, path, want string }{
		{"a.example.com", "/", "exact"},
		{"A.Example.com:8080", "/", "exact"},
		{"x.b.example.com", "/", "longsuffix"},
		{"x.example.com", "/", "suffix"},
		{"example.com", "/", "star"}, // a wildcard never matches the empty string
		{"a.other", "/", "prefix"},
		{"zzz", "/", "star"},
		{"routes.test", "/exact", "exact"},
		{"routes.test", "/api", "api"},
		{"routes.test", "/api/x?y=1", "api"},
		{"routes.test", "/v2/models", "regex"},
		{"routes.test", "/q?m=1", "query"},
		{"routes.test", "/q?m=2", ""},
		{"routes.test", "/pq", "prefix"},
		{"routes.test", "/apix", ""},
		{"routes.test", "/h", ""},
	} {
		resp := get(t, dp, 80, "GET", c.host, c.path, nil)
		want := 200
		if c.want == "" {
			want = 404
		}
		if resp.StatusCode != want || bodyOf(resp) != c.want {
			t.Errorf("%s%s: %d %q, want %d %q", c.host, c.path, resp.StatusCode, bodyOf(resp), want, c.want)
		}
	}
	resp := get(t, dp, 80, "GET", "routes.test", "/h", http.Header{"X-Test-H": {"yes"}})
	if bodyOf(resp) != "header" {
		t.Errorf("header match: %q", bodyOf(resp))
	}
}

// weighted_clusters picks by weight (fixed seed) and applies each
// cluster's own request headers.
func TestWeightedSplit(t *testing.T) {
	dp := newTestDP(t, Options{Rand: rand.New(rand.NewPCG(1, 2))})
	a, b := backend(t, "a"), backend(t, "b")
	wc := &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
		{Name: "ca", Weight: wrapperspb.UInt32(1), RequestHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-test-share", Value: "a"}}}},
		{Name: "cb", Weight: wrapperspb.UInt32(3)},
	}}
	load(t, dp, edsCluster(t, "ca", false), cla("ca", a.Listener.Addr().String()), edsCluster(t, "cb", false), cla("cb", b.Listener.Addr().String()),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{Match: prefix("/"),
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}}}}}}),
		seedListener(t))
	const n = 400
	counts := map[string]int{}
	for range n {
		resp := get(t, dp, 80, "GET", "x", "/", nil)
		counts[bodyOf(resp)]++
		if bodyOf(resp) == "a" && resp.Header.Get("Seen-X-Test-Share") != "a" {
			t.Fatal("share a lacks its request header")
		}
		if bodyOf(resp) == "b" && resp.Header.Get("Seen-X-Test-Share") != "" {
			t.Fatal("share b got a's request header")
		}
	}
	// Expected 100 / 300; the binomial standard deviation is 8.7.
	if counts["a"] < 70 || counts["a"] > 130 || counts["a"]+counts["b"] != n {
		t.Fatalf("split %v, want about 1:3", counts)
	}
}

// Envoy's local replies (source/common/router/router.cc): cluster not
// found (RouteAction.cluster_not_found_response_code, default 503), no
// healthy upstream 503 (sendNoHealthyUpstreamResponse), RouteAction.timeout
// 504 "upstream request timeout" (onUpstreamTimeoutAbort), no route 404.
// To a gRPC request each is a headers-only 200 with grpc-status from
// Grpc::Utility::httpToGrpcStatus and the body as grpc-message
// (Http::Utility::prepareLocalReply, source/common/http/utility.cc).
func TestLocalReplies(t *testing.T) {
	dp := newTestDP(t, Options{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	slow := &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "hang"}, Timeout: durationpb.New(50e6)}}
	missing500 := &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "nope"},
		ClusterNotFoundResponseCode: routev3.RouteAction_INTERNAL_SERVER_ERROR}}
	load(t, dp, edsCluster(t, "empty", false), cla("empty"), edsCluster(t, "hang", false), cla("hang", hang.Listener.Addr().String()),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{
			{Match: prefix("/missing500"), Action: missing500},
			{Match: prefix("/missing"), Action: toCluster("nope")},
			{Match: prefix("/empty"), Action: toCluster("empty")},
			{Match: prefix("/slow"), Action: slow},
		}}), seedListener(t))
	for _, c := range []struct {
		path string
		code int
		body string
		grpc int // httpToGrpcStatus(code)
	}{
		{"/missing", 503, "", 14}, {"/missing500", 500, "", 2}, {"/empty", 503, bodyNoHealthyUpstream, 14},
		{"/slow", 504, bodyUpstreamTimeout, 14}, {"/none", 404, "", 12},
	} {
		resp := get(t, dp, 80, "GET", "x", c.path, nil)
		if resp.StatusCode != c.code || bodyOf(resp) != c.body {
			t.Errorf("%s: %d %q, want %d %q", c.path, resp.StatusCode, bodyOf(resp), c.code, c.body)
		}
		resp = get(t, dp, 80, "POST", "x", c.path, http.Header{"Content-Type": {"application/grpc"}})
		want := []string{strconv.Itoa(c.grpc), c.body, "application/grpc", ""}
		got := []string{resp.Header.Get("grpc-status"), resp.Header.Get("grpc-message"), resp.Header.Get("content-type"), bodyOf(resp)}
		if resp.StatusCode != 200 || !slices.Equal(got, want) {
			t.Errorf("%s, gRPC: %d %q, want 200 %q", c.path, resp.StatusCode, got, want)
		}
	}
}

// An h2c cluster (explicit http2_protocol_options, no TLS) talks HTTP/2
// with prior knowledge.
func TestH2CUpstream(t *testing.T) {
	dp := newTestDP(t, Options{})
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	s := httptest.NewUnstartedServer(backendHandler("h2c"))
	s.Config.Protocols = &protos
	s.Start()
	t.Cleanup(s.Close)
	load(t, dp, edsCluster(t, "h2", true), cla("h2", s.Listener.Addr().String()),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{Match: prefix("/"), Action: toCluster("h2")}}}),
		seedListener(t))
	resp := get(t, dp, 80, "GET", "x", "/", nil)
	if resp.StatusCode != 200 || resp.Header.Get("x-seen-proto") != "HTTP/2.0" {
		t.Fatalf("%d proto %q", resp.StatusCode, resp.Header.Get("x-seen-proto"))
	}
}

// override_host: the metadata's host is used and reported in the served
// key; a host not in the cluster is skipped, and with none left the
// fallback (round robin) picks and is counted; further hosts of a comma
// list are used only by retries.
func TestOverrideHost(t *testing.T) {
	dp := newTestDP(t, Options{})
	b1, b2 := backend(t, "b1"), backend(t, "b2")
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens: connect failure
	const cname = "outbound|54321||pool"
	retry := &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cname},
		RetryPolicy: &routev3.RetryPolicy{RetryOn: "connect-failure", NumRetries: wrapperspb.UInt32(1)}}}
	load(t, dp, overrideHostCluster(t, cname), cla(cname, b1.Listener.Addr().String(), b2.Listener.Addr().String(), deadAddr),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{
			{Match: prefix("/retry"), Action: retry},
			{Match: prefix("/"), Action: toCluster(cname)},
		}}))
	ac := dp.active.Load()
	table := ac.routes["http.80"]
	run := func(path, pick string) (*extproc.Response, map[string]*structpb.Struct) {
		t.Helper()
		md := map[string]*structpb.Struct{}
		if pick != "" {
			md["envoy.lb"] = &structpb.Struct{Fields: map[string]*structpb.Value{"x-gateway-destination-endpoint": structpb.NewStringValue(pick)}}
		}
		req := &extproc.Request{Method: "GET", Path: path, Authority: "x", Scheme: "http", Headers: http.Header{}}
		sel := routeSel{r: table.selectVirtualHost("x").selectRoute(req)}
		resp, served, err := dp.router(context.Background(), ac, sel, req, md)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp, served
	}
	servedHost := func(s map[string]*structpb.Struct) string {
		return s["envoy.lb"].GetFields()["x-gateway-destination-endpoint-served"].GetStringValue()
	}
	b2Addr := b2.Listener.Addr().String()
	resp, served := run("/", b2Addr)
	if resp.Headers.Get("x-backend") != "b2" || servedHost(served) != b2Addr || dp.Counters().OverrideHostFallbacks != 0 {
		t.Fatalf("pick b2: backend %q served %q fallbacks %d", resp.Headers.Get("x-backend"), servedHost(served), dp.Counters().OverrideHostFallbacks)
	}
	resp, _ = run("/", "10.9.9.9:1,"+b2Addr) // first host unknown: skipped
	if resp.Headers.Get("x-backend") != "b2" || dp.Counters().OverrideHostFallbacks != 0 {
		t.Fatalf("unknown then b2: %q", resp.Headers.Get("x-backend"))
	}
	resp, served = run("/", "10.9.9.9:1") // nothing usable: fallback
	if resp.Status != 200 || dp.Counters().OverrideHostFallbacks != 1 || servedHost(served) == "" {
		t.Fatalf("fallback: %d fallbacks %d served %q", resp.Status, dp.Counters().OverrideHostFallbacks, servedHost(served))
	}
	resp, _ = run("/", deadAddr+","+b2Addr) // no retry policy: the list is not walked
	if resp.Status != 503 || dp.Counters().Retries != 0 {
		t.Fatalf("no retry: %d retries %d", resp.Status, dp.Counters().Retries)
	}
	resp, served = run("/retry", deadAddr+","+b2Addr) // the retry takes the next host
	if resp.Headers.Get("x-backend") != "b2" || servedHost(served) != b2Addr || dp.Counters().Retries != 1 || dp.Counters().OverrideHostFallbacks != 1 {
		t.Fatalf("retry: %q served %q retries %d", resp.Headers.Get("x-backend"), servedHost(served), dp.Counters().Retries)
	}
}

func seedClusters(t *testing.T) []*clusterv3.Cluster {
	t.Helper()
	l := seedListener(t)
	_ = l
	gw := seedGateway()
	res, err := core.BuildGateway(&gw, core.Inputs{}, core.Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.Clusters
}

var _ = strings.Contains
