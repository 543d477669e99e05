// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"
	"sort"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
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
	conn := adsclient.Dial(b, addr, adsclient.MaxRecvMsgSize(256<<20))
	n := node("bench", gw.Namespace, gw.Name)
	// The node on the first request only: the ACKs are what Envoy sends
	// with set_node_on_first_message_only.
	sotw := adsclient.NewSotW(b, conn, n, adsclient.NodeOnFirstOnly())
	delta := adsclient.NewDelta(b, conn, n, adsclient.NodeOnFirstOnly())
	must := func(err error) {
		if err != nil {
			b.Helper()
			b.Fatal(err)
		}
	}
	// The SotW ACK repeats the 20,000 names requested.
	ack := func(r *discoveryv3.DiscoveryResponse, dr *discoveryv3.DeltaDiscoveryResponse) {
		must(sotw.ACK(r))
		must(delta.ACK(dr))
	}
	recv := func(want int, cluster string) (*discoveryv3.DiscoveryResponse, *discoveryv3.DeltaDiscoveryResponse) {
		r, err := sotw.Recv(time.Minute)
		must(err)
		dr, err := delta.Recv(time.Minute)
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
	must(sotw.Request(resourcev3.EndpointType, names...))
	must(delta.Subscribe(resourcev3.EndpointType, names...))
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
