// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

const (
	seedShadowCluster = "outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local"
	seedEPPCluster    = "outbound|9002||vllm-llama3-8b-epp.llm-namespace.svc.cluster.local"
)

// runXDS serves the seed Gateway from an in-process pilot xds.Server on
// lis until the returned stop is called (also at cleanup); grpcOpts are
// the gRPC server's options (TLS, authentication).
func runXDS(t *testing.T, lis net.Listener, grpcOpts ...grpc.ServerOption) (stop func()) {
	t.Helper()
	stop, _ = runXDSServer(t, lis, grpcOpts...)
	return stop
}

// runXDSServer is runXDS that also returns the server (for its debug
// handler).
func runXDSServer(t *testing.T, lis net.Listener, grpcOpts ...grpc.ServerOption) (stop func(), srv *xds.Server) {
	t.Helper()
	return serveXDS(t, lis, seedGateway(), []model.ClusterEndpoints{
		{Cluster: seedShadowCluster, Endpoints: []model.Endpoint{
			{Address: "10.244.0.13", Port: 8000}, {Address: "10.244.0.14", Port: 8000}, {Address: "10.244.0.15", Port: 8000},
		}},
		{Cluster: seedEPPCluster, Endpoints: []model.Endpoint{{Address: "10.244.0.16", Port: 9002}}},
	}, grpcOpts...)
}

// serveXDS serves gw, with endpoints, from an in-process pilot xds.Server
// (translation, core.Validate, ADS) on lis until the returned stop is
// called (also at cleanup).
func serveXDS(t *testing.T, lis net.Listener, gw model.Gateway, endpoints []model.ClusterEndpoints, grpcOpts ...grpc.ServerOption) (stop func(), srv *xds.Server) {
	t.Helper()
	done := make(chan struct{})
	gws := krt.NewStaticCollection(nil, []model.Gateway{gw}, krt.WithStop(done))
	eps := krt.NewStaticCollection(nil, endpoints, krt.WithStop(done))
	srv, err := xds.NewServer(xds.Config{
		Gateways: gws, Endpoints: eps, Translate: core.Options{InferenceEnabled: true},
		Debounce: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		GRPCOptions: grpcOpts,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(ctx, lis) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("xds Run: %v", err)
		}
		close(done)
	}
	t.Cleanup(stop)
	return stop, srv
}

// The seed end to end, state of the world and delta: pilot's xDS is
// accepted (no NACK), the pool route reaches a model server, the EPP (not
// running: its address refuses connections) fails open, so the request goes
// through the override_host fallback; after the ADS server goes away the
// configuration keeps serving, and the data plane reconnects when it is
// back.
func TestEndToEndSeed(t *testing.T) {
	for _, delta := range []bool{false, true} {
		name := "sotw"
		if delta {
			name = "delta"
		}
		t.Run(name, func(t *testing.T) { testEndToEnd(t, delta) })
	}
}

func testEndToEnd(t *testing.T, delta bool) {
	ctx := testCtx(t)
	servers := map[string]string{}
	for _, n := range []string{"10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000"} {
		servers[n] = backend(t, n).Listener.Addr().String()
	}
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close()
	servers["10.244.0.16:9002"] = refusedAddr // the EPP is down

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adsAddr := lis.Addr().String()
	stop := runXDS(t, lis)

	dp := runDP(t, testBootstrap(t, adsAddr, delta), servers, Options{MaxBackoff: 100 * time.Millisecond})

	if err := dp.WaitFor(ctx, func(s Snapshot) bool {
		return s.Listeners["0.0.0.0_80"] != nil && len(s.Endpoints[seedShadowCluster]) == 3 && s.Clusters[seedEPPCluster] != nil
	}); err != nil {
		t.Fatalf("%v; last NACK %+v", err, dp.Snapshot().LastNACK)
	}
	if s := dp.Snapshot(); s.Counters.NACKs != 0 || s.Counters.ACKs == 0 {
		t.Fatalf("counters %+v, NACK %+v", s.Counters, s.LastNACK)
	}
	resp := get(t, dp, 80, "GET", "llm.ssup2.com", "/v1/models", nil)
	if resp.StatusCode != 200 || servers[bodyOf(resp)] == "" {
		t.Fatalf("seed request: %d %q", resp.StatusCode, bodyOf(resp))
	}
	if c := dp.Counters(); c.ExtProcFailuresAllowed != 1 || c.OverrideHostFallbacks != 1 {
		t.Fatalf("want one allowed ext_proc failure and one fallback, got %+v", c)
	}
	if resp := get(t, dp, 80, "GET", "other.host", "/", nil); resp.StatusCode != 404 {
		t.Fatalf("unknown host: %d", resp.StatusCode)
	}

	stop()
	if err := dp.WaitFor(ctx, func(s Snapshot) bool { return !s.Connected }); err != nil {
		t.Fatal(err)
	}
	resp = get(t, dp, 80, "GET", "llm.ssup2.com", "/", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("after disconnect: %d", resp.StatusCode)
	}
	lis2, err := net.Listen("tcp", adsAddr)
	if err != nil {
		t.Skipf("cannot rebind %s for the reconnect half: %v", adsAddr, err)
	}
	runXDS(t, lis2)
	if err := dp.WaitFor(ctx, func(s Snapshot) bool { return s.Connected }); err != nil {
		t.Fatal(err)
	}
	if s := dp.Snapshot(); s.Counters.NACKs != 0 || s.Listeners["0.0.0.0_80"] == nil {
		t.Fatalf("after reconnect: %+v", s.Counters)
	}
}
