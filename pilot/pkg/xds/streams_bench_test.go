// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/cputime"
)

// BenchmarkEndpointChangeStreams10000 is BenchmarkEndpointChangeOnePool10000
// as two proxies of the 10,000-pool Gateway see it, on real ADS streams
// over loopback: one SotW and one delta, each subscribed to the Gateway's
// 20,000 EDS names as Envoy subscribes (every SotW request lists them
// all). One op: replace one pool's endpoints, wait until both streams have
// the new assignment (the only resource sent), send both ACKs and wait
// until the Cache has parked both streams' next watches. cpu-ms/op is the
// process's CPU time per op: the server, and both clients, of which the
// SotW one marshals a 20,000-name ACK per op as Envoy does (which
// go-control-plane then decodes and turns into its subscription: work
// outside our code, BenchmarkSotwRequestLibrary).
func BenchmarkEndpointChangeStreams10000(b *testing.B) {
	const pools = 10000
	gw, eps := benchGateway(pools)
	srv, _, endpoints, addr := runBenchServer(b, []model.Gateway{gw}, eps, prometheus.NewRegistry(), krt.NewDebugHandler())
	names := make([]string, 0, len(eps))
	for _, e := range eps {
		names = append(names, e.Cluster)
	}
	sort.Strings(names)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	n := node("bench", gw.Namespace, gw.Name)
	sotw, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		b.Fatal(err)
	}
	delta, err := ads.DeltaAggregatedResources(ctx)
	if err != nil {
		b.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			b.Helper()
			b.Fatal(err)
		}
	}
	ack := func(r *discoveryv3.DiscoveryResponse, dr *discoveryv3.DeltaDiscoveryResponse) {
		must(sotw.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, VersionInfo: r.GetVersionInfo(),
			ResponseNonce: r.GetNonce(), ResourceNames: names}))
		must(delta.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: dr.GetNonce()}))
	}
	recv := func(want int, cluster string) (*discoveryv3.DiscoveryResponse, *discoveryv3.DeltaDiscoveryResponse) {
		r, err := sotw.Recv()
		must(err)
		dr, err := delta.Recv()
		must(err)
		if len(r.GetResources()) != want || len(dr.GetResources()) != want ||
			(cluster != "" && dr.GetResources()[0].GetName() != cluster) {
			b.Fatalf("got %d (sotw) and %d (delta) assignments, want %d (%s)", len(r.GetResources()), len(dr.GetResources()), want, cluster)
		}
		return r, dr
	}
	gwKey := gw.Namespace + "/" + gw.Name
	parked := func() {
		deadline := time.Now().Add(time.Minute)
		for {
			srv.cache.mu.Lock()
			got := len(srv.cache.watches[gwKey])
			srv.cache.mu.Unlock()
			if got == 2 {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d parked watches, want 2", got)
			}
			// A sleep, not a busy loop: cpu-ms/op counts this process.
			time.Sleep(20 * time.Microsecond)
		}
	}
	must(sotw.Send(&discoveryv3.DiscoveryRequest{Node: n, TypeUrl: resourcev3.EndpointType, ResourceNames: names}))
	must(delta.Send(&discoveryv3.DeltaDiscoveryRequest{Node: n, TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: names}))
	ack(recv(len(names), ""))
	parked()

	cpu0 := cputime.Process(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pool := i % pools
		extra := fmt.Sprintf("10.250.%d.%d", (i/250)%250, i%250+1)
		endpoints.UpdateObject(benchPoolEndpoints(pool, extra))
		ack(recv(1, benchShadowCluster(pool)))
		parked()
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Process(b)-cpu0)/1e6/float64(b.N), "cpu-ms/op")
}
