// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/cputime"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// Sizes of the large-Gateway scenario: benchPools pools and routes (the
// *10000 benchmarks use 10,000), each pool with benchPodsPerPool pods.
const (
	benchPools       = 1000
	benchPodsPerPool = 10
)

// benchGateway is bench-gw/gateway with one HTTP listener and pools
// HTTPRoutes, route i (host pool-i.example.com) sending to InferencePool
// bench/pool-i; and the endpoints of every shadow cluster (benchPodsPerPool
// pods on 8000) and EPP cluster (one pod on 9002).
func benchGateway(pools int) (model.Gateway, []model.ClusterEndpoints) {
	r := seed.HTTPRoute()
	rule := r.Spec.Rules[0]
	routes := make([]*model.Route, 0, pools)
	var eps []model.ClusterEndpoints
	for i := range pools {
		name := fmt.Sprintf("pool-%04d", i)
		p := seedmodel.PoolBackend("bench", name, name+"-ip-00000000", inferencev1.EndpointPickerFailOpen)
		routes = append(routes, &model.Route{
			Kind: "HTTPRoute", Namespace: "bench", Name: name,
			CreationTimestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			Hostnames:         []string{name + ".example.com"},
			Rules:             []model.Rule{{Index: 0, HTTP: &rule, Backends: []model.Backend{{Weight: 1, Pool: p}}}},
		})
		eps = append(eps, benchPoolEndpoints(i, ""), model.ClusterEndpoints{
			Cluster:   core.ClusterName(uint32(p.EPP.Port), p.EPP.Host),
			Endpoints: []model.Endpoint{{Address: fmt.Sprintf("10.200.%d.%d", i/250, i%250), Port: 9002}},
		})
	}
	gw := model.Gateway{Namespace: "bench-gw", Name: "gateway", Listeners: []model.Listener{{
		Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Routes: routes,
	}}}
	return gw, eps
}

// benchPoolEndpoints are pool i's shadow cluster endpoints: its
// benchPodsPerPool pods, plus extra when not "".
func benchPoolEndpoints(i int, extra string) model.ClusterEndpoints {
	ce := model.ClusterEndpoints{Cluster: benchShadowCluster(i)}
	for j := range benchPodsPerPool {
		ce.Endpoints = append(ce.Endpoints, model.Endpoint{Address: fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j+1), Port: 8000})
	}
	if extra != "" {
		ce.Endpoints = append(ce.Endpoints, model.Endpoint{Address: extra, Port: 8000})
	}
	return ce
}

func benchShadowCluster(i int) string {
	return core.ClusterName(54321, fmt.Sprintf("pool-%04d-ip-00000000.bench.svc.cluster.local", i))
}

// benchSub is the wildcard subscription of a delta stream that holds
// returned (name -> version).
type benchSub struct{ returned map[string]string }

func (s benchSub) ReturnedResources() map[string]string     { return s.returned }
func (s benchSub) IsWildcard() bool                         { return true }
func (s benchSub) SubscribedResources() map[string]struct{} { return nil }

// BenchmarkEndpointChangeOnePool: the 1,000-pool Gateway of benchGateway is
// published by a running Server over static input collections (the real krt
// collections, push path and Cache; Debounce 1ns, so a change on an idle
// server is pushed at once and no debounce wait is in the figure). One op
// is: replace one pool's endpoints (a static collection update adding an
// 11th pod) and wait until the Cache answers a parked delta EDS watch with
// the new ClusterLoadAssignment, which must be the only resource sent and
// hold the new pod. Opening the watch and checking the response are outside
// the timer. Target: under 1 ms per op.
//
// Extra metrics: cla-builds/op and gateway-builds/op are transformation
// runs of the EndpointResources and GatewayResources collections (krt
// debug counters; must be 1 and 0, else the benchmark fails); push-ns/op is
// the push path's share (validate, serialize, publish and answer watches,
// from infermesh_xds_push_duration_seconds); the rest of ns/op is krt event
// delivery and the CLA transformation.
func BenchmarkEndpointChangeOnePool(b *testing.B) { benchEndpointChange(b, benchPools) }

// BenchmarkEndpointChangeOnePool10000 is BenchmarkEndpointChangeOnePool
// with 10,000 pools and routes.
func BenchmarkEndpointChangeOnePool10000(b *testing.B) { benchEndpointChange(b, 10000) }

func benchEndpointChange(b *testing.B, pools int) {
	s := startBenchServer(b, pools)
	benchPools := pools
	// The first request is answered after the first publish, with every
	// assignment.
	ch, _ := s.watch(resourcev3.EndpointType, map[string]string{}, "")
	first := s.recv(ch)
	if len(first.GetResources()) != 2*benchPools {
		b.Fatalf("initial EDS response has %d assignments, want %d", len(first.GetResources()), 2*benchPools)
	}
	returned := versions(first)
	cla0, gw0 := benchTransformations(b, s.debug)
	push0, pushes0 := settledPushTime(b, s.reg, 1)

	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pool := i % benchPools
		extra := fmt.Sprintf("10.250.%d.%d", (i/250)%250, i%250+1)
		ch, cancelWatch := s.watch(resourcev3.EndpointType, returned, "bench")
		b.StartTimer()

		s.endpoints.UpdateObject(benchPoolEndpoints(pool, extra))
		r := s.recv(ch)

		b.StopTimer()
		cancelWatch()
		benchCheckCLA(b, r, benchShadowCluster(pool), extra)
		returned[r.GetResources()[0].GetName()] = r.GetResources()[0].GetVersion()
		b.StartTimer()
	}
	b.StopTimer()

	cla1, gw1 := benchTransformations(b, s.debug)
	push1, pushes1 := settledPushTime(b, s.reg, pushes0+uint64(b.N))
	if cla1-cla0 != uint64(b.N) || gw1 != gw0 {
		b.Fatalf("over %d ops: %d CLA and %d Gateway transformation runs, want %d and 0", b.N, cla1-cla0, gw1-gw0, b.N)
	}
	if pushes1-pushes0 != uint64(b.N) {
		b.Fatalf("over %d ops: %d pushes", b.N, pushes1-pushes0)
	}
	b.ReportMetric(float64(cla1-cla0)/float64(b.N), "cla-builds/op")
	b.ReportMetric(float64(gw1-gw0)/float64(b.N), "gateway-builds/op")
	b.ReportMetric((push1-push0)*1e9/float64(b.N), "push-ns/op")
}

// benchServer is a running Server publishing benchGateway over static
// input collections (the real krt collections, push path and Cache;
// Debounce 1ns, so a change on an idle server is pushed at once and no
// debounce wait is in a figure). Everything stops at the benchmark's end.
type benchServer struct {
	b         *testing.B
	srv       *Server
	gw        model.Gateway
	gateways  krt.StaticCollection[model.Gateway]
	endpoints krt.StaticCollection[model.ClusterEndpoints]
	reg       *prometheus.Registry
	debug     *krt.DebugHandler
	node      *corev3.Node
}

func startBenchServer(b *testing.B, pools int) *benchServer {
	gw, eps := benchGateway(pools)
	s := &benchServer{b: b, gw: gw, reg: prometheus.NewRegistry(), debug: krt.NewDebugHandler(), node: node("bench", gw.Namespace, gw.Name)}
	s.srv, s.gateways, s.endpoints, _ = runBenchServer(b, []model.Gateway{gw}, eps, s.reg, s.debug)
	return s
}

// runBenchServer runs a Server over static collections of gws and eps on a
// loopback listener, with Debounce 1ns (a change on an idle server is
// pushed at once), until the benchmark's cleanup. It returns the server,
// the collections and the listener's address.
func runBenchServer(b *testing.B, gws []model.Gateway, eps []model.ClusterEndpoints, reg *prometheus.Registry, debug *krt.DebugHandler) (
	*Server, krt.StaticCollection[model.Gateway], krt.StaticCollection[model.ClusterEndpoints], string,
) {
	stop := make(chan struct{})
	gateways := krt.NewStaticCollection(nil, gws, krt.WithStop(stop))
	endpoints := krt.NewStaticCollection(nil, eps, krt.WithStop(stop))
	srv, err := NewServer(Config{
		Gateways: gateways, Endpoints: endpoints,
		Translate: core.Options{InferenceEnabled: true},
		Debounce:  time.Nanosecond, MaxDelay: time.Nanosecond,
		Registry: reg, KrtDebug: debug,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, lis) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
		close(stop)
	})
	return srv, gateways, endpoints, lis.Addr().String()
}

// watch opens a delta watch of typeURL for a wildcard stream holding
// returned (name -> version).
func (s *benchServer) watch(typeURL string, returned map[string]string, nonce string) (chan cachev3.DeltaResponse, func()) {
	ch := make(chan cachev3.DeltaResponse, 1)
	req := &discoveryv3.DeltaDiscoveryRequest{Node: s.node, TypeUrl: typeURL, ResponseNonce: nonce}
	cancelWatch, err := s.srv.Cache().CreateDeltaWatch(req, benchSub{returned: returned}, ch)
	if err != nil {
		s.b.Fatal(err)
	}
	return ch, cancelWatch
}

// recv waits for a watch's response.
func (s *benchServer) recv(ch chan cachev3.DeltaResponse) *discoveryv3.DeltaDiscoveryResponse {
	select {
	case r := <-ch:
		dr, err := r.GetDeltaDiscoveryResponse()
		if err != nil {
			s.b.Fatal(err)
		}
		return dr
	case <-time.After(time.Minute):
		s.b.Fatal("no delta response")
	}
	return nil
}

// versions are the names and versions a delta response carries: what a
// stream holds after it.
func versions(r *discoveryv3.DeltaDiscoveryResponse) map[string]string {
	out := map[string]string{}
	for _, res := range r.GetResources() {
		out[res.GetName()] = res.GetVersion()
	}
	return out
}

// BenchmarkRouteChangeOneGateway: on the same running Server, one op
// changes the hostname of one of the Gateway's 1,000 routes (a static
// collection update of the Gateway model) and waits until the Cache
// answers a parked delta RDS watch with the new route configuration.
// Opening the watch and checking the response are outside the timer. The
// op translates the Gateway again (core.Translator: what the route
// change touches); cpu-ms/op is the process's CPU time in the timed
// parts; push-ns/op is the push path's share (validate, serialize,
// publish), where the previous set's unchanged clusters and listener are
// neither validated nor serialized again.
func BenchmarkRouteChangeOneGateway(b *testing.B) { benchRouteChange(b, benchPools) }

// BenchmarkRouteChangeOneGateway10000 is BenchmarkRouteChangeOneGateway
// with 10,000 routes and pools.
func BenchmarkRouteChangeOneGateway10000(b *testing.B) { benchRouteChange(b, 10000) }

// BenchmarkRouteRuleChangeOneGateway is BenchmarkRouteChangeOneGateway
// with another change: one op gives the rule of one route a new path
// prefix, so its virtual host keeps its place among the others (route
// 7919*i mod 1,000: spread over the list), where a new hostname
// (changed-i.example.com) sorts first. A comparison of the whole route
// configuration up to the first difference (GatewayResources.Equals) costs
// here what it does not there.
func BenchmarkRouteRuleChangeOneGateway(b *testing.B) { benchRouteRuleChange(b, benchPools) }

// BenchmarkRouteRuleChangeOneGateway10000 is
// BenchmarkRouteRuleChangeOneGateway with 10,000 routes and pools.
func BenchmarkRouteRuleChangeOneGateway10000(b *testing.B) { benchRouteRuleChange(b, 10000) }

func benchRouteChange(b *testing.B, pools int) {
	benchRouteEdit(b, pools, func(i int) int { return i % pools }, func(i int, r *model.Route) string {
		host := fmt.Sprintf("changed-%d.example.com", i)
		r.Hostnames = []string{host}
		return host
	})
}

func benchRouteRuleChange(b *testing.B, pools int) {
	benchRouteEdit(b, pools, func(i int) int { return (7919 * i) % pools }, func(i int, r *model.Route) string {
		path := fmt.Sprintf("/changed-%d", i)
		rule := *r.Rules[0].HTTP
		rule.Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(path)}}}
		r.Rules = []model.Rule{r.Rules[0]}
		r.Rules[0].HTTP = &rule
		return path
	})
}

// benchRouteEdit runs the route change benchmarks: op i replaces route
// at(i) of the Gateway by a copy that edit changes, and edit returns a
// string the new route configuration holds.
func benchRouteEdit(b *testing.B, pools int, at func(i int) int, edit func(i int, r *model.Route) string) {
	s := startBenchServer(b, pools)
	ch, _ := s.watch(resourcev3.RouteType, map[string]string{}, "")
	first := s.recv(ch)
	if len(first.GetResources()) != 1 {
		b.Fatalf("initial RDS response has %d route configurations, want 1", len(first.GetResources()))
	}
	returned := versions(first)
	push0, pushes0 := settledPushTime(b, s.reg, 1)

	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		gw := s.gw
		l := gw.Listeners[0]
		l.Routes = append([]*model.Route(nil), l.Routes...)
		r := *l.Routes[at(i)]
		host := edit(i, &r)
		l.Routes[at(i)] = &r
		gw.Listeners = []model.Listener{l}
		ch, cancelWatch := s.watch(resourcev3.RouteType, returned, "bench")
		b.StartTimer()
		cpu0 := cputime.Process(b)

		s.gateways.UpdateObject(gw)
		resp := s.recv(ch)

		cpu += cputime.Process(b) - cpu0
		b.StopTimer()
		cancelWatch()
		if len(resp.GetResources()) != 1 {
			b.Fatalf("RDS response has %d route configurations, want 1", len(resp.GetResources()))
		}
		// The new hostname is in the route configuration (a byte search:
		// unmarshalling 10,000 virtual hosts here would leave garbage
		// that the collector then scans during the timed part).
		res := resp.GetResources()[0]
		if res.GetResource().GetTypeUrl() != resourcev3.RouteType || !bytes.Contains(res.GetResource().GetValue(), []byte(host)) {
			b.Fatalf("route configuration %s does not hold %s", res.GetName(), host)
		}
		returned[res.GetName()] = res.GetVersion()
		b.StartTimer()
	}
	b.StopTimer()
	push1, pushes1 := settledPushTime(b, s.reg, pushes0+uint64(b.N))
	if pushes1-pushes0 != uint64(b.N) {
		b.Fatalf("over %d ops: %d pushes", b.N, pushes1-pushes0)
	}
	b.ReportMetric((push1-push0)*1e9/float64(b.N), "push-ns/op")
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// benchCheckCLA fails unless r carries exactly the assignment of cluster,
// with benchPodsPerPool+1 endpoints including extra.
func benchCheckCLA(b *testing.B, r *discoveryv3.DeltaDiscoveryResponse, cluster, extra string) {
	b.Helper()
	if len(r.GetResources()) != 1 || len(r.GetRemovedResources()) != 0 || r.GetResources()[0].GetName() != cluster {
		b.Fatalf("want only %s, got %d resources, removed %v", cluster, len(r.GetResources()), r.GetRemovedResources())
	}
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := r.GetResources()[0].GetResource().UnmarshalTo(cla); err != nil {
		b.Fatal(err)
	}
	addrs := claAddrs(cla)
	found := false
	for _, a := range addrs {
		found = found || a == extra+":8000"
	}
	if cla.GetClusterName() != cluster || len(addrs) != benchPodsPerPool+1 || !found {
		b.Fatalf("assignment %s has %v, want %d endpoints including %s:8000", cla.GetClusterName(), addrs, benchPodsPerPool+1, extra)
	}
}

// benchTransformations are the transformation runs so far of the Server's
// EndpointResources and GatewayResources collections.
func benchTransformations(b *testing.B, h *krt.DebugHandler) (cla, gw uint64) {
	b.Helper()
	var foundCLA, foundGW bool
	for _, d := range h.Dump() {
		switch d.Name {
		case "xds/EndpointResources":
			cla, foundCLA = d.Transformations, true
		case "xds/GatewayResources":
			gw, foundGW = d.Transformations, true
		}
	}
	if !foundCLA || !foundGW {
		b.Fatal("the Server's collections are not in the krt debug handler")
	}
	return cla, gw
}

// benchPushTime is the sum (seconds) and count of
// infermesh_xds_push_duration_seconds.
// settledPushTime is benchPushTime once the push count has reached
// atLeast and not moved for 50 ms (at most 10 s): a push is counted when
// it ends, which may be after its response was read, so a count taken at
// once could miss the push just received (the initial one before the
// ops, the last op's after them).
func settledPushTime(b *testing.B, reg *prometheus.Registry, atLeast uint64) (float64, uint64) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	sum, n := benchPushTime(b, reg)
	for stable := time.Now(); time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		s2, n2 := benchPushTime(b, reg)
		if n2 != n {
			sum, n, stable = s2, n2, time.Now()
			continue
		}
		if n >= atLeast && time.Since(stable) >= 50*time.Millisecond {
			break
		}
	}
	return sum, n
}

func benchPushTime(b *testing.B, reg *prometheus.Registry) (float64, uint64) {
	b.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "infermesh_xds_push_duration_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleSum(), h.GetSampleCount()
		}
	}
	b.Fatal("no infermesh_xds_push_duration_seconds")
	return 0, 0
}
