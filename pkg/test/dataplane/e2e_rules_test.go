// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// End-to-end tests, pilot's xDS server to the data plane, for rules that
// core's builder tests check on the generated configuration alone:
// a GRPCRoute to a pool goes through that pool's EPP
// (TestGRPCRouteToPoolGoesThroughTheEPP), route precedence between header
// and query parameter matches (TestRoutePrecedence), and each weighted pool
// of a rule calling its own EPP with its own failure mode
// (TestWeightedPoolsEachCallTheirOwnEPP).

// pickingEPP is an EPP that picks one endpoint for every request (the
// servedRecorder's protocol) and counts its streams.
type pickingEPP struct {
	servedRecorder
	streams atomic.Int32
}

func (p *pickingEPP) Process(s extprocsvc.ExternalProcessor_ProcessServer) error {
	p.streams.Add(1)
	return p.servedRecorder.Process(s)
}

// servePickingEPP serves an EPP picking pick on a loopback port (plaintext,
// as a pool's EPP without TLS is reached); it returns the EPP, its address
// and a stop function (also run at cleanup).
func servePickingEPP(t *testing.T, pick string) (*pickingEPP, string, func()) {
	t.Helper()
	epp := &pickingEPP{servedRecorder: servedRecorder{pick: pick}}
	gs := grpc.NewServer()
	extprocsvc.RegisterExternalProcessorServer(gs, epp)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return epp, lis.Addr().String(), gs.Stop
}

// servePilot serves gw and endpoints from pilot's xDS server and returns a
// data plane that has accepted the configuration (no NACK) and warmed
// listener http:80; servers maps the endpoints' addresses to loopback ones.
func servePilot(t *testing.T, gw model.Gateway, endpoints []model.ClusterEndpoints, servers map[string]string, opts Options) *DataPlane {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveXDS(t, lis, gw, endpoints)
	dp := runDP(t, testBootstrap(t, lis.Addr().String(), false), servers, opts)
	if err := dp.WaitFor(testCtx(t), func(s Snapshot) bool {
		if s.LastNACK != nil || s.Listeners["0.0.0.0_80"] == nil {
			return s.LastNACK != nil
		}
		for _, ce := range endpoints {
			if len(s.Endpoints[ce.Cluster]) != len(ce.Endpoints) {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("pilot's configuration never warmed: %v", err)
	}
	if s := dp.Snapshot(); s.LastNACK != nil {
		t.Fatalf("data plane NACKed pilot's %s: %s", s.LastNACK.TypeURL, s.LastNACK.Message)
	}
	return dp
}

func eppEndpoints(p *model.PoolBackend, addr string) model.ClusterEndpoints {
	return model.ClusterEndpoints{Cluster: core.ClusterName(uint32(p.EPP.Port), p.EPP.Host), Endpoints: []model.Endpoint{{Address: addr, Port: uint32(p.EPP.Port)}}}
}

// A GRPCRoute whose backend is an InferencePool (FailClose, h2c) sends each
// RPC through the pool's EPP and to the pod the EPP picked: every Check is
// answered by pod 2 of two, the EPP sees one stream per RPC, and the
// override_host pick never falls back. With the EPP gone the RPC fails
// and no pod is reached (a gRPC request has a body, and with bodies the
// FULL_DUPLEX_STREAMED mode ends failure_mode_allow, so this would hold
// for a FailOpen pool too: the failure mode per pool is
// TestEndToEndWeightedPoolsKeepTheirOwnEPP's); an RPC no rule matches
// never reaches the EPP.
func TestEndToEndGRPCRouteToPoolCallsItsEPP(t *testing.T) {
	pool := seedmodel.PoolBackend("llm", "grpc-pool", "grpc-pool-ip", inferencev1.EndpointPickerFailClose)
	pool.AppProtocol = inferencev1.AppProtocolH2C
	pods := []string{"10.244.3.1:8000", "10.244.3.2:8000"}
	servers := map[string]string{}
	var podCalls atomic.Int32
	for _, p := range pods {
		servers[p] = serveGRPCPod(t, p, &podCalls)
	}
	epp, eppAddr, stopEPP := servePickingEPP(t, pods[1])
	servers["10.244.3.9:9002"] = eppAddr

	gw := seedmodel.Gateway()
	gw.Listeners[0].Routes = []*model.Route{{
		Kind: "GRPCRoute", Namespace: "llm", Name: "generate", Hostnames: []string{"grpc.example.com"},
		CreationTimestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Rules: []model.Rule{{
			GRPC: &gwv1.GRPCRouteRule{Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{
				Service: ptr.To("grpc.health.v1.Health"), Method: ptr.To("Check"),
			}}}},
			Backends: []model.Backend{{Weight: 1, Pool: pool}},
		}},
	}}
	dp := servePilot(t, gw, []model.ClusterEndpoints{
		{Cluster: core.ClusterName(uint32(pool.Port), pool.Host), Endpoints: []model.Endpoint{
			{Address: "10.244.3.1", Port: 8000}, {Address: "10.244.3.2", Port: 8000},
		}},
		eppEndpoints(pool, "10.244.3.9"),
	}, servers, Options{})

	conn, err := grpc.NewClient(dp.Addr(80).String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := healthpb.NewHealthClient(conn)
	const rpcs = 6
	for i := range rpcs {
		var hdr metadata.MD
		if _, err := c.Check(testCtx(t), &healthpb.HealthCheckRequest{}, grpc.Header(&hdr)); err != nil {
			t.Fatalf("Check %d: %v", i, err)
		}
		if got := hdr.Get("x-pod"); len(got) != 1 || got[0] != pods[1] {
			t.Fatalf("Check %d answered by pod %v, want the EPP's pick %s", i, got, pods[1])
		}
	}
	if n := epp.streams.Load(); n != rpcs {
		t.Errorf("the pool's EPP saw %d streams for %d RPCs", n, rpcs)
	}
	if cs := dp.Counters(); cs.OverrideHostFallbacks != 0 || cs.ExtProcFailuresAllowed != 0 {
		t.Errorf("counters %+v: want no override_host fallback and no allowed ext_proc failure", cs)
	}

	// An unmatched method is the data plane's Unimplemented, never the EPP's.
	if _, err := c.List(testCtx(t), &healthpb.HealthListRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("List (no rule matches): %v, want Unimplemented", err)
	}
	if n := epp.streams.Load(); n != rpcs {
		t.Errorf("an unmatched RPC reached the EPP (%d streams)", n)
	}

	// Without its EPP the RPC fails and reaches no pod.
	stopEPP()
	before := podCalls.Load()
	if _, err := c.Check(testCtx(t), &healthpb.HealthCheckRequest{}); status.Code(err) == codes.OK {
		t.Error("Check with the pool's EPP gone succeeded: it did not go through the EPP")
	}
	if n := podCalls.Load(); n != before {
		t.Errorf("with the EPP gone a pod was reached (%d calls, %d before)", n, before)
	}
}

// serveGRPCPod serves a health server on a loopback port as pod name: every
// RPC's response headers carry x-pod: name, and calls counts the RPCs.
func serveGRPCPod(t *testing.T, name string, calls *atomic.Int32) string {
	t.Helper()
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		calls.Add(1)
		if err := grpc.SetHeader(ctx, metadata.Pairs("x-pod", name)); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// Route precedence between header and query parameter matches, as the
// Gateway API orders rules with equal path matches: more header matches
// first, then more query parameter matches. The rules are written in the
// opposite order, so a data plane taking them as written would answer
// every request below from another backend.
func TestEndToEndHeaderAndQueryPrecedence(t *testing.T) {
	names := []string{"q1", "h1", "h1q1", "h2"}
	servers := map[string]string{}
	var endpoints []model.ClusterEndpoints
	backends := map[string][]model.Backend{}
	for i, n := range names {
		addr := "10.0.1." + strconv.Itoa(i+1)
		servers[addr+":8080"] = backend(t, n).Listener.Addr().String()
		host := n + ".ns.svc.cluster.local"
		endpoints = append(endpoints, model.ClusterEndpoints{Cluster: core.ClusterName(80, host), Endpoints: []model.Endpoint{{Address: addr, Port: 8080}}})
		backends[n] = []model.Backend{{Weight: 1, Service: &model.ServiceBackend{Host: host, Port: 80}}}
	}
	path := &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/v1")}
	hdr := func(n, v string) gwv1.HTTPHeaderMatch {
		return gwv1.HTTPHeaderMatch{Name: gwv1.HTTPHeaderName(n), Value: v}
	}
	query := []gwv1.HTTPQueryParamMatch{{Name: "debug", Value: "1"}}
	rule := func(i int, m gwv1.HTTPRouteMatch, to string) model.Rule {
		m.Path = path
		return model.Rule{Index: i, HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{m}}, Backends: backends[to]}
	}
	route := &model.Route{
		Kind: "HTTPRoute", Namespace: "ns", Name: "prec", Hostnames: []string{"prec.example.com"},
		CreationTimestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Rules: []model.Rule{
			rule(0, gwv1.HTTPRouteMatch{QueryParams: query}, "q1"),
			rule(1, gwv1.HTTPRouteMatch{Headers: []gwv1.HTTPHeaderMatch{hdr("X-A", "1")}}, "h1"),
			rule(2, gwv1.HTTPRouteMatch{Headers: []gwv1.HTTPHeaderMatch{hdr("X-A", "1")}, QueryParams: query}, "h1q1"),
			rule(3, gwv1.HTTPRouteMatch{Headers: []gwv1.HTTPHeaderMatch{hdr("X-A", "1"), hdr("X-B", "2")}}, "h2"),
		},
	}
	gw := model.Gateway{Namespace: "gateway-namespace", Name: "gateway", Listeners: []model.Listener{{
		Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Routes: []*model.Route{route},
	}}}
	dp := servePilot(t, gw, endpoints, servers, Options{})

	for _, tc := range []struct {
		path    string
		headers http.Header
		want    string
	}{
		// Two header matches outrank a header and a query parameter.
		{"/v1/chat?debug=1", http.Header{"X-A": {"1"}, "X-B": {"2"}}, "h2"},
		// With equal header matches the query parameter match decides.
		{"/v1/chat?debug=1", http.Header{"X-A": {"1"}}, "h1q1"},
		{"/v1/chat", http.Header{"X-A": {"1"}}, "h1"},
		// A header match outranks a query parameter match.
		{"/v1/chat?debug=1", http.Header{"X-B": {"2"}}, "q1"},
		{"/v1/chat?debug=1&x=y", nil, "q1"},
	} {
		resp := get(t, dp, 80, "GET", "prec.example.com", tc.path, tc.headers)
		if resp.StatusCode != 200 || bodyOf(resp) != tc.want {
			t.Errorf("GET %s with %v: %d from %q, want 200 from %s", tc.path, tc.headers, resp.StatusCode, bodyOf(resp), tc.want)
		}
	}
	if resp := get(t, dp, 80, "GET", "prec.example.com", "/v1/chat?debug=2", http.Header{"X-B": {"2"}}); resp.StatusCode != 404 {
		t.Errorf("GET matching no rule: %d from %q, want 404", resp.StatusCode, bodyOf(resp))
	}
}

// Two InferencePools as weighted backends of one rule each keep their own
// EPP and failure mode: every request served by pool A went through EPP A
// and reached the pod it picked, likewise for B, and no pick fell back.
// With both EPPs gone, pool A's share (FailOpen) still reaches an A pod
// through the fallback while pool B's share (FailClose) is a 500 and never
// reaches a B pod.
func TestEndToEndWeightedPoolsKeepTheirOwnEPP(t *testing.T) {
	a := seedmodel.PoolBackend("llm", "pool-a", "pool-a-ip", inferencev1.EndpointPickerFailOpen)
	b := seedmodel.PoolBackend("llm", "pool-b", "pool-b-ip", inferencev1.EndpointPickerFailClose)
	servers := map[string]string{}
	pool := func(p *model.PoolBackend, subnet string) model.ClusterEndpoints {
		ce := model.ClusterEndpoints{Cluster: core.ClusterName(uint32(p.Port), p.Host)}
		for i := 1; i <= 2; i++ {
			ip := subnet + strconv.Itoa(i)
			servers[ip+":8000"] = backend(t, ip+":8000").Listener.Addr().String()
			ce.Endpoints = append(ce.Endpoints, model.Endpoint{Address: ip, Port: 8000})
		}
		return ce
	}
	eppA, addrA, stopA := servePickingEPP(t, "10.244.1.2:8000")
	eppB, addrB, stopB := servePickingEPP(t, "10.244.2.2:8000")
	servers["10.244.1.9:9002"], servers["10.244.2.9:9002"] = addrA, addrB

	gw := seedmodel.GatewayWith(seed.GatewayNamespace, seed.GatewayName, "llm", "split", "llm.example.com", a)
	gw.Listeners[0].Routes[0].Rules[0].Backends = []model.Backend{{Weight: 1, Pool: a}, {Weight: 1, Pool: b}}
	dp := servePilot(t, gw, []model.ClusterEndpoints{
		pool(a, "10.244.1."), pool(b, "10.244.2."),
		eppEndpoints(a, "10.244.1.9"), eppEndpoints(b, "10.244.2.9"),
	}, servers, Options{Rand: rand.New(rand.NewPCG(5, 6))})

	const n = 30
	served := map[string]int{}
	for range n {
		resp := get(t, dp, 80, "GET", "llm.example.com", "/v1/models", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("request: %d %q", resp.StatusCode, bodyOf(resp))
		}
		served[bodyOf(resp)]++
	}
	if served["10.244.1.2:8000"]+served["10.244.2.2:8000"] != n {
		t.Fatalf("pods that answered %v: want only each EPP's pick, 10.244.1.2:8000 and 10.244.2.2:8000", served)
	}
	if served["10.244.1.2:8000"] == 0 || served["10.244.2.2:8000"] == 0 {
		t.Fatalf("pods that answered %v: the split never reached one of the pools", served)
	}
	if ga, gb := int(eppA.streams.Load()), int(eppB.streams.Load()); ga != served["10.244.1.2:8000"] || gb != served["10.244.2.2:8000"] {
		t.Errorf("EPP A saw %d streams and EPP B %d, for %v: each pool's requests go through its own EPP", ga, gb, served)
	}
	if c := dp.Counters(); c.OverrideHostFallbacks != 0 || c.ExtProcFailuresAllowed != 0 {
		t.Errorf("counters %+v: want no fallback and no allowed ext_proc failure", c)
	}

	stopA()
	stopB()
	outcomes := map[string]int{}
	for range n {
		resp := get(t, dp, 80, "GET", "llm.example.com", "/v1/models", nil)
		switch {
		case resp.StatusCode == 200 && (bodyOf(resp) == "10.244.1.1:8000" || bodyOf(resp) == "10.244.1.2:8000"):
			outcomes["200 from pool A"]++
		case resp.StatusCode == 500 && bodyOf(resp) != "10.244.2.1:8000" && bodyOf(resp) != "10.244.2.2:8000":
			outcomes["500"]++
		default:
			t.Fatalf("with both EPPs gone: %d from %q, want 200 from a pool A pod (FailOpen) or 500 (FailClose)", resp.StatusCode, bodyOf(resp))
		}
	}
	if outcomes["200 from pool A"] == 0 || outcomes["500"] == 0 {
		t.Errorf("with both EPPs gone: %v, want both pool A's fallback and pool B's 500", outcomes)
	}
	if c := dp.Counters(); c.ExtProcFailuresAllowed != int64(outcomes["200 from pool A"]) {
		t.Errorf("allowed ext_proc failures %d, want one per pool A request (%d)", c.ExtProcFailuresAllowed, outcomes["200 from pool A"])
	}
}
