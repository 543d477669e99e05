// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"testing"
	"time"

	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/test/cputime"
)

// Sizes of the large-Gateway scenario shared by the benchmarks.
const (
	benchPools       = 1000
	benchPodsPerPool = 10
)

// bigGateway is one Gateway with one HTTP listener and pools
// HTTPRoutes, route i sending PathPrefix /pool-i on host pool-i.example.com
// to InferencePool bench/pool-i (FailOpen on even i, FailClose on odd), and
// the Inputs giving each pool's shadow cluster benchPodsPerPool ready pods
// and each EPP cluster one.
func bigGateway(pools int) (*model.Gateway, Inputs) {
	routes := make([]*model.Route, 0, pools)
	in := Inputs{Endpoints: map[string][]Endpoint{}}
	for i := range pools {
		mode := inferencev1.EndpointPickerFailOpen
		if i%2 == 1 {
			mode = inferencev1.EndpointPickerFailClose
		}
		name := fmt.Sprintf("pool-%04d", i)
		p := pool("bench", name, mode)
		routes = append(routes, httpRoute("bench", name, []string{name + ".example.com"}, model.Rule{
			HTTP:     &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/" + name)}},
			Backends: []model.Backend{{Weight: 1, Pool: p}},
		}))
		eps := make([]Endpoint, benchPodsPerPool)
		for j := range eps {
			eps[j] = Endpoint{Address: fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j+1), Port: 8000}
		}
		in.Endpoints[ClusterName(uint32(p.Port), p.Host)] = eps
		in.Endpoints[eppClusterName(p.EPP)] = []Endpoint{{Address: fmt.Sprintf("10.200.%d.%d", i/250, i%250), Port: 9002}}
	}
	return gateway(routes...), in
}

// BenchmarkBuildGateway1000Pools measures BuildGateway (listeners, routes,
// clusters, endpoints and Validate) for one Gateway with 1,000 HTTPRoutes,
// each to its own InferencePool of 10 ready pods. One op is one complete
// translation of that Gateway. Target: under 50 ms and under 50 MB
// allocated per op (Envoy Gateway's translator: about 139 ms and 58 MiB for
// 850 routes). cpu-ms/op is the process's CPU time per op (the build plus
// the garbage collector's concurrent work), which a busy machine disturbs
// less than ns/op.
func BenchmarkBuildGateway1000Pools(b *testing.B) { benchBuildGateway(b, benchPools) }

// BenchmarkBuildGateway10000Pools is BenchmarkBuildGateway1000Pools with
// 10,000 routes and pools. Target: under 500 ms and 500 MB per op.
func BenchmarkBuildGateway10000Pools(b *testing.B) { benchBuildGateway(b, 10000) }

func benchBuildGateway(b *testing.B, benchPools int) {
	gw, in := bigGateway(benchPools)
	check := func(res Resources) {
		b.Helper()
		// Per pool: a shadow cluster and an EPP cluster, each with a CLA.
		if len(res.Clusters) != 2*benchPools || len(res.Endpoints) != 2*benchPools {
			b.Fatalf("got %d clusters and %d CLAs, want %d each", len(res.Clusters), len(res.Endpoints), 2*benchPools)
		}
		if len(res.Listeners) != 1 || len(res.Routes) != 1 || len(res.Routes[0].VirtualHosts) != benchPools {
			b.Fatalf("got %d listeners, %d route configurations, want 1 each with %d virtual hosts", len(res.Listeners), len(res.Routes), benchPools)
		}
		pods := 0
		for _, cla := range res.Endpoints {
			for _, loc := range cla.Endpoints {
				pods += len(loc.LbEndpoints)
			}
		}
		if want := benchPools*benchPodsPerPool + benchPools; pods != want {
			b.Fatalf("got %d endpoints in all CLAs, want %d", pods, want)
		}
	}
	res, err := BuildGateway(gw, in, inferenceOn)
	if err != nil {
		b.Fatal(err)
	}
	check(res)
	b.ReportAllocs()
	cpu0 := cputime.Process(b)
	b.ResetTimer()
	for b.Loop() {
		if res, err = BuildGateway(gw, in, inferenceOn); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Process(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	check(res)
}

// BenchmarkTranslatorRouteChange10000: core.Translator.Build of the
// 10,000-route Gateway of bigGateway after one route's hostname changed
// (the translation part of xds's BenchmarkRouteChangeOneGateway10000);
// cpu-ms/op is the process's CPU time in the timed parts (the collector's
// concurrent work included).
func BenchmarkTranslatorRouteChange10000(b *testing.B) {
	gw, in := bigGateway(10000)
	tr := NewTranslator(inferenceOn)
	if _, err := tr.Build(gw, in); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		g := *gw
		l := g.Listeners[0]
		l.Routes = append([]*model.Route(nil), l.Routes...)
		r := *l.Routes[i%len(l.Routes)]
		r.Hostnames = []string{fmt.Sprintf("changed-%d.example.com", i)}
		l.Routes[i%len(l.Routes)] = &r
		g.Listeners = []model.Listener{l}
		i++
		b.StartTimer()
		cpu0 := cputime.Process(b)
		if _, err := tr.Build(&g, in); err != nil {
			b.Fatal(err)
		}
		cpu += cputime.Process(b) - cpu0
	}
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
