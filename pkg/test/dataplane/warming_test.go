// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// warmingCluster is an EDS cluster over ADS with the given initial fetch
// timeout (nil: unset) and connect timeout (to make versions differ).
func warmingCluster(name string, fetch *durationpb.Duration, connect time.Duration) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		ConnectTimeout: durationpb.New(connect),
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3, InitialFetchTimeout: fetch,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
	}
}

func assignment(name string, addrs ...string) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	loc := &endpointv3.LocalityLbEndpoints{}
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		var p uint32
		for _, c := range port {
			p = p*10 + uint32(c-'0')
		}
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p},
			}}},
		}}})
	}
	cla.Endpoints = []*endpointv3.LocalityLbEndpoints{loc}
	return cla
}

// TestReplacedClusterWarmsAgain: a replaced cluster is not used with the
// assignment received before it; the old one serves until an assignment
// arrives after the replacement; with initial_fetch_timeout 0 it waits.
func TestReplacedClusterWarmsAgain(t *testing.T) {
	dp := newTestDP(t, Options{})
	never := durationpb.New(0)
	load(t, dp, warmingCluster("c", never, time.Second), assignment("c", "10.0.0.1:80"))
	if s := dp.Snapshot(); s.Clusters["c"] == nil || len(s.Endpoints["c"]) != 1 {
		t.Fatalf("first cluster not warm: %v", s.Endpoints)
	}
	load(t, dp, warmingCluster("c", never, 2*time.Second))
	time.Sleep(100 * time.Millisecond) // nothing may warm it, not even time
	s := dp.Snapshot()
	if s.Clusters["c"].GetConnectTimeout().AsDuration() != time.Second || len(s.Endpoints["c"]) != 1 {
		t.Fatalf("while the replacement warms the old cluster must serve; got connect_timeout %v, endpoints %v",
			s.Clusters["c"].GetConnectTimeout().AsDuration(), s.Endpoints["c"])
	}
	load(t, dp, assignment("c", "10.0.0.1:80"))
	s = dp.Snapshot()
	if s.Clusters["c"].GetConnectTimeout().AsDuration() != 2*time.Second || len(s.Endpoints["c"]) != 1 {
		t.Fatalf("after its assignment the replacement must serve; got connect_timeout %v, endpoints %v",
			s.Clusters["c"].GetConnectTimeout().AsDuration(), s.Endpoints["c"])
	}
}

// TestInitialFetchTimeoutWarmsWithNoEndpoints: when the timeout fires
// first, the replaced cluster serves with no endpoints (503 no healthy
// upstream) until its assignment arrives; unset means Envoy's 15 s.
func TestInitialFetchTimeoutWarmsWithNoEndpoints(t *testing.T) {
	if got := initialFetchTimeout(&corev3.ConfigSource{}); got != 15*time.Second {
		t.Errorf("unset initial_fetch_timeout = %v, want Envoy's 15s", got)
	}
	dp := newTestDP(t, Options{})
	load(t, dp, warmingCluster("c", durationpb.New(50*time.Millisecond), time.Second), assignment("c", "10.0.0.1:80"))
	load(t, dp, warmingCluster("c", durationpb.New(50*time.Millisecond), 2*time.Second))
	ctx := testCtx(t)
	if err := dp.WaitFor(ctx, func(s Snapshot) bool {
		return s.Clusters["c"].GetConnectTimeout().AsDuration() == 2*time.Second
	}); err != nil {
		t.Fatal(err)
	}
	if eps := dp.Snapshot().Endpoints["c"]; len(eps) != 0 {
		t.Fatalf("a cluster warmed by the timeout has no endpoints, got %v", eps)
	}
	load(t, dp, assignment("c", "10.0.0.2:80"))
	if eps := dp.Snapshot().Endpoints["c"]; len(eps) != 1 || eps[0] != "10.0.0.2:80" {
		t.Fatalf("after its assignment: %v", eps)
	}
}

// dualBackend serves HTTP/1.1 and h2c with prior knowledge and reports the
// protocol it got in x-seen-proto.
func dualBackend(t *testing.T, name string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: backendHandler(name), Protocols: &p, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return lis.Addr().String()
}

// TestEndToEndPoolProtocolChange: the pool's appProtocol turns to h2c, so
// CDS replaces its cluster while its endpoints stay the same. The next
// requests must reach the model servers over HTTP/2: pilot must send the
// unchanged assignment again for the data plane's re-warming cluster
// (state of the world and delta).
func TestEndToEndPoolProtocolChange(t *testing.T) {
	for _, delta := range []bool{false, true} {
		name := "sotw"
		if delta {
			name = "delta"
		}
		t.Run(name, func(t *testing.T) { testPoolProtocolChange(t, delta) })
	}
}

func testPoolProtocolChange(t *testing.T, delta bool) {
	ctx := testCtx(t)
	servers := map[string]string{}
	for _, n := range []string{"10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000"} {
		servers[n] = dualBackend(t, n)
	}
	gws, addr := runXDSGateways(t)
	dp := runDP(t, testBootstrap(t, addr, delta), servers, Options{})
	if err := dp.WaitFor(ctx, func(s Snapshot) bool {
		return s.Listeners["0.0.0.0_80"] != nil && len(s.Endpoints[seedShadowCluster]) == 3
	}); err != nil {
		t.Fatalf("%v; last NACK %+v", err, dp.Snapshot().LastNACK)
	}
	if resp := get(t, dp, 80, "GET", "llm.ssup2.com", "/v1/models", nil); resp.StatusCode != 200 || resp.Header.Get("x-seen-proto") != "HTTP/1.1" {
		t.Fatalf("before: %d %q over %q", resp.StatusCode, bodyOf(resp), resp.Header.Get("x-seen-proto"))
	}

	pool := seedmodel.Pool()
	pool.AppProtocol = inferencev1.AppProtocolH2C
	gws.UpdateObject(seedmodel.GatewayWith("gateway-namespace", "gateway", "llm-namespace", "llm-route", "llm.ssup2.com", pool))
	wait, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	err := dp.WaitFor(wait, func(s Snapshot) bool { return isHTTP2(s.Clusters[seedShadowCluster]) })
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("5 s after the pool turned to h2c its replaced cluster still warms: no ClusterLoadAssignment for %s was sent after the new cluster", seedShadowCluster)
	} else if err != nil {
		t.Fatal(err)
	}
	resp := get(t, dp, 80, "GET", "llm.ssup2.com", "/v1/models", nil)
	if resp.StatusCode != 200 || resp.Header.Get("x-seen-proto") != "HTTP/2.0" {
		t.Fatalf("after the change: %d %q over %q", resp.StatusCode, bodyOf(resp), resp.Header.Get("x-seen-proto"))
	}
	if s := dp.Snapshot(); s.Counters.NACKs != 0 {
		t.Fatalf("NACK: %+v", s.LastNACK)
	}
}

func isHTTP2(c *clusterv3.Cluster) bool {
	a := c.GetTypedExtensionProtocolOptions()[httpProtocolOptions]
	if a == nil {
		return false
	}
	var o upstreamhttpv3.HttpProtocolOptions
	return a.UnmarshalTo(&o) == nil && o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

// runXDSGateways serves the seed from an in-process pilot on loopback and
// returns the Gateway collection (to change) and the ADS address.
func runXDSGateways(t *testing.T) (krt.StaticCollection[model.Gateway], string) {
	t.Helper()
	done := make(chan struct{})
	gws := krt.NewStaticCollection(nil, []model.Gateway{seedGateway()}, krt.WithStop(done))
	eps := krt.NewStaticCollection(nil, []model.ClusterEndpoints{
		{Cluster: seedShadowCluster, Endpoints: []model.Endpoint{
			{Address: "10.244.0.13", Port: 8000}, {Address: "10.244.0.14", Port: 8000}, {Address: "10.244.0.15", Port: 8000},
		}},
		{Cluster: seedEPPCluster, Endpoints: []model.Endpoint{{Address: "10.244.0.16", Port: 9002}}},
	}, krt.WithStop(done))
	srv, err := xds.NewServer(xds.Config{
		Gateways: gws, Endpoints: eps, Translate: core.Options{InferenceEnabled: true},
		Debounce: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("xds Run: %v", err)
		}
		close(done)
	})
	return gws, lis.Addr().String()
}
