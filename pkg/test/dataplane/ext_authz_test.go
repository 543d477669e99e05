// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// fakeAuthz is a gRPC Authorization server that allows a request whose
// check carries header x-let-in: yes, setting x-user on it and removing
// x-drop; it denies any other with 401, a header and a body; it records
// every CheckRequest.
type fakeAuthz struct {
	authv3.UnimplementedAuthorizationServer
	mu     sync.Mutex
	checks []*authv3.CheckRequest
}

func (f *fakeAuthz) Check(_ context.Context, r *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	f.mu.Lock()
	f.checks = append(f.checks, r)
	f.mu.Unlock()
	h := r.GetAttributes().GetRequest().GetHttp().GetHeaders()
	if h["x-let-in"] != "yes" {
		return &authv3.CheckResponse{Status: &status.Status{Code: int32(codes.PermissionDenied)},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
				Headers: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "www-authenticate", Value: "Bearer"}}},
				Body:    "no entry",
			}}}, nil
	}
	return &authv3.CheckResponse{Status: &status.Status{Code: int32(codes.OK)},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers: []*corev3.HeaderValueOption{
				{Header: &corev3.HeaderValue{Key: "x-test-user", Value: "alice"}, Append: wrapperspb.Bool(false)},
				{Header: &corev3.HeaderValue{Key: ":authority", Value: "evil.example.com"}, Append: wrapperspb.Bool(false)},
			},
			HeadersToRemove: []string{"x-test-drop", "host"},
		}}}, nil
}

func (f *fakeAuthz) last(t *testing.T) *authv3.CheckRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.checks) == 0 {
		t.Fatal("the authorization server got no check")
	}
	return f.checks[len(f.checks)-1]
}

func (f *fakeAuthz) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.checks)
}

// authzGateway has three routes on listener http:80, each to Service a:
// grpc.example.com behind a gRPC ExternalAuth (Service authz:9000, h2c,
// allowed headers x-let-in and x-test-drop, body up to 8 bytes),
// http.example.com behind an HTTP one (Service authz-http:8000, path
// prefix /check, allowed header x-let-in, response header x-test-user),
// and broken.example.com whose ExternalAuth did not resolve.
func authzGateway() model.Gateway {
	svcA := model.Backend{Weight: 1, Service: &model.ServiceBackend{Host: "a.ns.svc.cluster.local", Port: 80}}
	route := func(name string, ea *model.ExternalAuth) *model.Route {
		return &model.Route{Kind: "HTTPRoute", Namespace: "ns", Name: name, Hostnames: []string{name + ".example.com"},
			CreationTimestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Rules: []model.Rule{{
				HTTP:         &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterExternalAuth, ExternalAuth: &gwv1.HTTPExternalAuthFilter{}}}},
				Backends:     []model.Backend{svcA},
				ExternalAuth: []*model.ExternalAuth{ea},
			}}}
	}
	grpcAuth := &model.ExternalAuth{Protocol: gwv1.HTTPRouteExternalAuthGRPCProtocol,
		Service:               &model.ServiceBackend{Host: "authz.ns.svc.cluster.local", Port: 9000, HTTP2: true},
		AllowedRequestHeaders: []string{"x-let-in", "x-test-drop"}, MaxRequestBytes: 8}
	httpAuth := &model.ExternalAuth{Protocol: gwv1.HTTPRouteExternalAuthHTTPProtocol,
		Service:               &model.ServiceBackend{Host: "authz-http.ns.svc.cluster.local", Port: 8000},
		AllowedRequestHeaders: []string{"x-let-in"}, AllowedResponseHeaders: []string{"x-test-user"}, PathPrefix: "/check"}
	broken := &model.ExternalAuth{Protocol: gwv1.HTTPRouteExternalAuthGRPCProtocol, Invalid: "Service ns/gone not found"}
	return model.Gateway{Namespace: "gateway-namespace", Name: "gateway", Listeners: []model.Listener{{
		Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
		Routes: []*model.Route{route("broken", broken), route("grpc", grpcAuth), route("http", httpAuth)},
	}}}
}

// ext_authz end to end, as Envoy's filter does it (ext_authz.cc,
// ext_authz_grpc_impl.cc, ext_authz_http_impl.cc, check_request_utils.cc):
// pilot's configuration is accepted; a denied request gets the server's
// status, header and body and never reaches the backend; an allowed one
// reaches it with the server's header set and its removals done, but not
// its :authority or Host changes (decoder_header_mutation_rules
// disallow_system); the CheckRequest carries only the allowed headers (and
// the pseudo-headers they name) and the body; a body over max_request_bytes
// is 413 without a check; the HTTP service gets the path prefix and the
// allowed headers, and its 200 header reaches the backend; an unresolved
// ExternalAuth is 500; a server that cannot be reached is
// status_on_error, 503.
func TestExtAuthzAsEnvoy(t *testing.T) {
	ctx := testCtx(t)
	var mu sync.Mutex
	reached := 0
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached++
		mu.Unlock()
		backendHandler("a").ServeHTTP(w, r)
	}))
	t.Cleanup(a.Close)
	authz := &fakeAuthz{}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	authv3.RegisterAuthorizationServer(gs, authz)
	go func() { _ = gs.Serve(gl) }()
	t.Cleanup(gs.Stop)
	var httpSeen []*http.Request
	httpAuthz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		httpSeen = append(httpSeen, r.Clone(context.Background()))
		mu.Unlock()
		if r.Header.Get("x-let-in") != "yes" {
			w.Header().Set("x-why", "no")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, "refused")
			return
		}
		w.Header().Set("x-test-user", "bob")
		w.Header().Set("x-test-other", "not copied")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(httpAuthz.Close)

	servers := map[string]string{"10.0.0.1:8080": a.Listener.Addr().String(), "10.0.0.9:9000": gl.Addr().String(),
		"10.0.0.8:8000": httpAuthz.Listener.Addr().String()}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := serveXDS(t, lis, authzGateway(), []model.ClusterEndpoints{
		{Cluster: core.ClusterName(80, "a.ns.svc.cluster.local"), Endpoints: []model.Endpoint{{Address: "10.0.0.1", Port: 8080}}},
		{Cluster: core.ClusterName(9000, "authz.ns.svc.cluster.local"), Endpoints: []model.Endpoint{{Address: "10.0.0.9", Port: 9000}}},
		{Cluster: core.ClusterName(8000, "authz-http.ns.svc.cluster.local"), Endpoints: []model.Endpoint{{Address: "10.0.0.8", Port: 8000}}},
	})
	defer stop()
	dp := runDP(t, testBootstrap(t, lis.Addr().String(), false), servers, Options{})
	if err := dp.WaitFor(ctx, func(s Snapshot) bool { return s.Listeners["0.0.0.0_80"] != nil || s.LastNACK != nil }); err != nil {
		t.Fatalf("the listener never warmed: %v", err)
	}
	if s := dp.Snapshot(); s.LastNACK != nil {
		t.Fatalf("data plane NACKed pilot's %s: %s", s.LastNACK.TypeURL, s.LastNACK.Message)
	}

	// Denied: the server's answer, and the backend never reached.
	resp := get(t, dp, 80, "GET", "grpc.example.com", "/v1/models?x=1", http.Header{"Authorization": {"Bearer t"}})
	if resp.StatusCode != 401 || bodyOf(resp) != "no entry" || resp.Header.Get("www-authenticate") != "Bearer" {
		t.Fatalf("denied: %d %q www-authenticate=%q, want 401 \"no entry\" Bearer", resp.StatusCode, bodyOf(resp), resp.Header.Get("www-authenticate"))
	}
	if reached != 0 {
		t.Fatalf("a denied request reached the backend")
	}
	hr := authz.last(t).GetAttributes().GetRequest().GetHttp()
	if hr.GetMethod() != "GET" || hr.GetPath() != "/v1/models?x=1" || hr.GetHost() != "grpc.example.com" {
		t.Fatalf("CheckRequest http: method %q path %q host %q", hr.GetMethod(), hr.GetPath(), hr.GetHost())
	}
	if _, ok := hr.GetHeaders()["authorization"]; ok {
		t.Fatalf("CheckRequest headers %v: authorization is not in the allow list", hr.GetHeaders())
	}

	// Allowed: the server's header set, x-test-drop removed, :authority
	// kept; the body (8 bytes: the limit) in the check.
	req, _ := http.NewRequest("POST", "http://"+dp.Addr(80).String()+"/v1/completions", strings.NewReader("12345678"))
	req.Host = "grpc.example.com"
	req.Header.Set("x-let-in", "yes")
	req.Header.Set("x-test-drop", "gone")
	req.Header.Set("x-test-keep", "kept")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != 200 || string(body) != "a" || r2.Header.Get("Seen-X-Test-User") != "alice" || r2.Header.Get("Seen-X-Test-Drop") != "" ||
		r2.Header.Get("Seen-X-Test-Keep") != "kept" || r2.Header.Get("x-seen-host") != "grpc.example.com" {
		t.Fatalf("allowed: %d %q user=%q drop=%q keep=%q host=%q", r2.StatusCode, body, r2.Header.Get("Seen-X-Test-User"),
			r2.Header.Get("Seen-X-Test-Drop"), r2.Header.Get("Seen-X-Test-Keep"), r2.Header.Get("x-seen-host"))
	}
	hr = authz.last(t).GetAttributes().GetRequest().GetHttp()
	if hr.GetBody() != "12345678" || hr.GetHeaders()["x-let-in"] != "yes" || hr.GetHeaders()["x-test-drop"] != "gone" || len(hr.GetHeaders()) != 2 {
		t.Fatalf("CheckRequest: body %q headers %v, want the body and exactly the two allowed headers", hr.GetBody(), hr.GetHeaders())
	}

	// Over max_request_bytes: 413, no check.
	n := authz.count()
	big, _ := http.NewRequest("POST", "http://"+dp.Addr(80).String()+"/", strings.NewReader("123456789"))
	big.Host = "grpc.example.com"
	big.Header.Set("x-let-in", "yes")
	r3, err := http.DefaultClient.Do(big)
	if err != nil {
		t.Fatal(err)
	}
	r3.Body.Close()
	if r3.StatusCode != 413 || authz.count() != n {
		t.Fatalf("body over the limit: %d with %d new checks, want 413 and none", r3.StatusCode, authz.count()-n)
	}

	// HTTP service: prefix, allowed headers; denial passes its status,
	// headers and body; 200 copies only the allowed response header.
	resp = get(t, dp, 80, "GET", "http.example.com", "/x", http.Header{"X-Other": {"o"}})
	if resp.StatusCode != 403 || bodyOf(resp) != "refused" || resp.Header.Get("x-why") != "no" {
		t.Fatalf("http denied: %d %q x-why=%q", resp.StatusCode, bodyOf(resp), resp.Header.Get("x-why"))
	}
	resp = get(t, dp, 80, "GET", "http.example.com", "/x", http.Header{"X-Let-In": {"yes"}, "X-Other": {"o"}, "Authorization": {"Bearer t"}})
	if resp.StatusCode != 200 || resp.Header.Get("Seen-X-Test-User") != "bob" || resp.Header.Get("Seen-X-Test-Other") != "" {
		t.Fatalf("http allowed: %d user=%q other=%q", resp.StatusCode, resp.Header.Get("Seen-X-Test-User"), resp.Header.Get("Seen-X-Test-Other"))
	}
	mu.Lock()
	last := httpSeen[len(httpSeen)-1]
	mu.Unlock()
	if last.URL.Path != "/check/x" || last.Host != "http.example.com" || last.Header.Get("Authorization") != "Bearer t" ||
		last.Header.Get("X-Other") != "" || last.ContentLength != 0 {
		t.Fatalf("HTTP authorization request: path %q host %q authorization %q x-other %q length %d",
			last.URL.Path, last.Host, last.Header.Get("Authorization"), last.Header.Get("X-Other"), last.ContentLength)
	}

	// Unresolved: 500.
	if resp := get(t, dp, 80, "GET", "broken.example.com", "/", http.Header{"X-Let-In": {"yes"}}); resp.StatusCode != 500 {
		t.Fatalf("unresolved ExternalAuth: %d, want 500", resp.StatusCode)
	}

	// The server down: status_on_error.
	gs.Stop()
	before := reached
	if resp := get(t, dp, 80, "GET", "grpc.example.com", "/", http.Header{"X-Let-In": {"yes"}}); resp.StatusCode != 503 {
		t.Fatalf("authorization server down: %d, want 503 (status_on_error)", resp.StatusCode)
	}
	if reached != before {
		t.Fatalf("with the authorization server down the backend was reached")
	}
}

// Which OkHttpResponse header outcomes the stand-in applies, and which it
// refuses because Envoy releases disagree (applyAuthzMutations).
func TestExtAuthzHeaderOptionsAcrossReleases(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    authzMutation
		ok   bool
		want string
	}{
		{"set present", authzMutation{"x-have", "2", opSet}, true, "2"},
		{"set absent", authzMutation{"x-new", "2", opSet}, true, "2"},
		{"append present", authzMutation{"x-have", "2", opAppendIfExists}, true, "1,2"},
		{"append absent: release-dependent", authzMutation{"x-new", "2", opAppendIfExists}, false, ""},
		{"default action absent", authzMutation{"x-new", "2", opVersionDependent}, true, "2"},
		{"default action present: release-dependent", authzMutation{"x-have", "2", opVersionDependent}, false, ""},
		{"overwrite-if-exists absent: release-dependent", authzMutation{"x-new", "2", opOverwriteIfExists}, false, ""},
		{"x-envoy ignored", authzMutation{"x-envoy-thing", "2", opSet}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &extproc.Request{Headers: http.Header{"X-Have": {"1"}}}
			out, ok := applyAuthzMutations(&extAuthzConfig{rules: &extAuthzMutationRules{disallowSystem: true}}, r, authzResult{mutations: []authzMutation{tc.m}})
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && strings.Join(out.Headers.Values(tc.m.key), ",") != tc.want {
				t.Fatalf("%s = %q, want %q", tc.m.key, out.Headers.Values(tc.m.key), tc.want)
			}
		})
	}
}
