// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
)

// Sizes of the many-proxies scenario: 100 Gateways of 10 replicas each.
const (
	manyGateways = 100
	manyReplicas = 10
)

// manyGateway is Gateway ns-i/gw with one HTTPRoute (host h-i.example.com)
// to its own pool, and that pool's endpoints (10 pods and the EPP).
func manyGateway(i int, host string) (model.Gateway, []model.ClusterEndpoints) {
	ns := fmt.Sprintf("ns-%03d", i)
	p := seedmodel.PoolBackend(ns, "pool", "pool-ip-00000000", inferencev1.EndpointPickerFailOpen)
	gw := seedmodel.GatewayWith(ns, "gw", ns, "route", host, p)
	shadow := model.ClusterEndpoints{Cluster: core.ClusterName(uint32(p.Port), p.Host)}
	for j := range 10 {
		shadow.Endpoints = append(shadow.Endpoints, model.Endpoint{Address: fmt.Sprintf("10.%d.%d.%d", 100+i/250, i%250, j+1), Port: 8000})
	}
	epp := model.ClusterEndpoints{Cluster: core.ClusterName(uint32(p.EPP.Port), p.EPP.Host),
		Endpoints: []model.Endpoint{{Address: fmt.Sprintf("10.99.%d.%d", i/250, i%250), Port: 9002}}}
	return gw, []model.ClusterEndpoints{shadow, epp}
}

// benchProxy is one Envoy replica's ADS stream, state of the world or
// delta, following Envoy's ADS flow: CDS and LDS (wildcard) first, then
// EDS for the EDS clusters CDS gives and RDS for the route configurations
// LDS names; every response is ACKed. The domains of each route
// configuration it receives go to seen.
type benchProxy struct {
	id      int
	gateway int
	delta   bool
	conn    *grpc.ClientConn
	sotw    *adsclient.SotW
	dstream *adsclient.Delta
	node    *corev3.Node
	// names are the subscribed names per type (state of the world: the
	// full list each request repeats; delta: what was subscribed).
	names map[string][]string
	// seen receives (gateway, domains) for every route configuration.
	seen chan<- proxyRoutes
}

type proxyRoutes struct {
	proxy   int
	gateway int
	domains []string
	at      time.Time
}

// request asks for typeURL: on a SotW stream the type's whole list of
// names, on a delta stream the names added.
func (p *benchProxy) request(typeURL string, added []string) error {
	if p.delta {
		return p.dstream.Subscribe(typeURL, added...)
	}
	return p.sotw.Request(typeURL, p.names[typeURL]...)
}

// subscribe adds names of typeURL not yet subscribed and requests them.
func (p *benchProxy) subscribe(typeURL string, names []string) error {
	var added []string
	for _, n := range names {
		if !slices.Contains(p.names[typeURL], n) {
			added = append(added, n)
		}
	}
	if len(added) == 0 {
		return nil
	}
	p.names[typeURL] = append(p.names[typeURL], added...)
	return p.request(typeURL, added)
}

// next returns the next response's type and resources and its ACK; it
// waits until one comes or the stream ends (with ctx).
func (p *benchProxy) next() (typeURL string, resources []*anypb.Any, ack func() error, err error) {
	for {
		if p.delta {
			r, err := p.dstream.Recv(time.Minute)
			if errors.Is(err, adsclient.ErrNoResponse) {
				continue
			}
			return r.GetTypeUrl(), adsclient.Resources(r), func() error { return p.dstream.ACK(r) }, err
		}
		r, err := p.sotw.Recv(time.Minute)
		if errors.Is(err, adsclient.ErrNoResponse) {
			continue
		}
		return r.GetTypeUrl(), r.GetResources(), func() error { return p.sotw.ACK(r) }, err
	}
}

// run opens the stream and serves it until ctx ends; it returns the first
// error other than the stream's end by ctx.
func (p *benchProxy) run(ctx context.Context) error {
	var err error
	// One response read ahead at most, as a proxy reading its stream.
	if p.delta {
		p.dstream, err = adsclient.OpenDelta(ctx, p.conn, p.node, adsclient.Buffer(1))
		if err == nil {
			defer p.dstream.Close()
		}
	} else {
		p.sotw, err = adsclient.OpenSotW(ctx, p.conn, p.node, adsclient.Buffer(1))
		if err == nil {
			defer p.sotw.Close()
		}
	}
	if err != nil {
		return err
	}
	p.names = map[string][]string{}
	if err := p.request(resourcev3.ClusterType, nil); err != nil {
		return err
	}
	if err := p.request(resourcev3.ListenerType, nil); err != nil {
		return err
	}
	for {
		typeURL, resources, ack, err := p.next()
		if err != nil {
			return ctxErr(ctx, err)
		}
		var next []string
		switch typeURL {
		case resourcev3.ClusterType:
			cs, err := adsclient.Clusters(resources)
			if err != nil {
				return err
			}
			for _, c := range cs {
				if c.GetType() == clusterv3.Cluster_EDS {
					next = append(next, edsName(c))
				}
			}
		case resourcev3.ListenerType:
			ls, err := adsclient.Listeners(resources)
			if err != nil {
				return err
			}
			for _, l := range ls {
				for _, fc := range l.GetFilterChains() {
					for _, f := range fc.GetFilters() {
						hcm := &hcmv3.HttpConnectionManager{}
						if f.GetTypedConfig().UnmarshalTo(hcm) == nil && hcm.GetRds() != nil {
							next = append(next, hcm.GetRds().GetRouteConfigName())
						}
					}
				}
			}
		case resourcev3.RouteType:
			at := time.Now()
			rcs, err := adsclient.RouteConfigurations(resources)
			if err != nil {
				return err
			}
			for _, rc := range rcs {
				var domains []string
				for _, vh := range rc.GetVirtualHosts() {
					domains = append(domains, vh.GetDomains()...)
				}
				select {
				case p.seen <- proxyRoutes{proxy: p.id, gateway: p.gateway, domains: domains, at: at}:
				case <-ctx.Done():
					return nil
				}
			}
		}
		if err := ack(); err != nil {
			return ctxErr(ctx, err)
		}
		switch typeURL {
		case resourcev3.ClusterType:
			err = p.subscribe(resourcev3.EndpointType, next)
		case resourcev3.ListenerType:
			err = p.subscribe(resourcev3.RouteType, next)
		}
		if err != nil {
			return ctxErr(ctx, err)
		}
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// BenchmarkManyProxies: a running Server publishes
// manyGateways Gateways (one route and one pool each) to manyGateways x
// manyReplicas proxies on loopback, each on its own connection, delta and
// state-of-the-world streams alternating, each following Envoy's ADS flow
// and ACKing. One op changes the hostname of one Gateway's route and waits
// until every replica of that Gateway has received the new route
// configuration. Debounce is 1ns, so no debounce wait is in the figures.
//
// Metrics: ns/op is the change to the last replica; last-p50-ms and
// last-p99-ms its distribution over the ops; first-p50-ms the change to the
// first replica; entries/op the resources serialized per op: the push path
// serializes the changed Gateway's clusters, listener and route
// configuration once (4), however many streams receive them (the
// benchmark fails otherwise; that the unchanged three are serialized again
// at all is the translation's side, core.Translator); heap-B/stream the live heap added per connected,
// synced stream (both ends of the stream are in this process, so it is an
// upper bound for the server's share).
func BenchmarkManyProxies(b *testing.B) {
	var gws []model.Gateway
	var eps []model.ClusterEndpoints
	for i := range manyGateways {
		gw, e := manyGateway(i, fmt.Sprintf("h-%03d.example.com", i))
		gws = append(gws, gw)
		eps = append(eps, e...)
	}
	srv, gateways, _, addr := runBenchServer(b, gws, eps, prometheus.NewRegistry(), krt.NewDebugHandler())
	// The proxies stop with ctx, before the server does (cleanups run in
	// reverse order); their connections (adsclient.Dial) close first.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, manyGateways*manyReplicas)
	b.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	seen := make(chan proxyRoutes, 4*manyGateways*manyReplicas)
	// Wait for the first publish, so the heap before the streams holds
	// every entry already.
	for !srv.Ready() {
		time.Sleep(time.Millisecond)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range manyGateways * manyReplicas {
		g := i / manyReplicas
		conn := adsclient.Dial(b, addr)
		p := &benchProxy{id: i, gateway: g, delta: i%2 == 0, conn: conn, seen: seen,
			node: node(fmt.Sprintf("proxy-%d", i), fmt.Sprintf("ns-%03d", g), "gw")}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.run(ctx); err != nil {
				errs <- fmt.Errorf("proxy %d: %w", i, err)
			}
		}()
	}
	// wait returns when n distinct proxies have received a route
	// configuration that want accepts: when the first and the last did.
	wait := func(want func(proxyRoutes) bool, n int) (first, last time.Time) {
		deadline := time.After(2 * time.Minute)
		got := map[int]bool{}
		for len(got) < n {
			select {
			case r := <-seen:
				if !want(r) || got[r.proxy] {
					continue
				}
				if len(got) == 0 {
					first = r.at
				}
				last = r.at
				got[r.proxy] = true
			case err := <-errs:
				b.Fatal(err)
			case <-deadline:
				b.Fatalf("%d of %d proxies got the route configuration", len(got), n)
			}
		}
		return first, last
	}
	wait(func(r proxyRoutes) bool { return len(r.domains) > 0 }, manyGateways*manyReplicas)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	perStream := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(manyGateways*manyReplicas)

	var lastLat, firstLat []time.Duration
	entries0 := entriesBuilt.Load()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g := i % manyGateways
		host := fmt.Sprintf("changed-%d.example.com", i)
		gw, _ := manyGateway(g, host)
		start := time.Now()
		gateways.UpdateObject(gw)
		first, last := wait(func(r proxyRoutes) bool { return r.gateway == g && slices.Contains(r.domains, host) }, manyReplicas)
		firstLat = append(firstLat, first.Sub(start))
		lastLat = append(lastLat, last.Sub(start))
	}
	b.StopTimer()
	entries := entriesBuilt.Load() - entries0
	// A change of one route's hostname changes that many resources of the
	// Gateway (its route configuration): each is serialized once per
	// change, whatever the number of streams, and the unchanged ones not
	// at all.
	perChange := uint64(changedResources(b, "count-a.example.com", "count-b.example.com"))
	if perChange == 0 || entries != uint64(b.N)*perChange {
		b.Fatalf("%d route changes serialized %d resources, want %d each (the Gateway's resources the change alters, once), whatever the number of streams", b.N, entries, perChange)
	}
	pct := func(d []time.Duration, q float64) float64 {
		s := slices.Clone(d)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[int(q*float64(len(s)-1))]) / 1e6
	}
	b.ReportMetric(pct(lastLat, 0.5), "last-p50-ms")
	b.ReportMetric(pct(lastLat, 0.99), "last-p99-ms")
	b.ReportMetric(pct(firstLat, 0.5), "first-p50-ms")
	b.ReportMetric(float64(entries)/float64(b.N), "entries/op")
	b.ReportMetric(perStream, "heap-B/stream")
}

// changedResources is how many of gateway 0's listeners, route
// configurations and clusters differ between its route's hostname a and b.
func changedResources(b *testing.B, a, c string) int {
	b.Helper()
	build := func(host string) map[string]proto.Message {
		gw, _ := manyGateway(0, host)
		res, err := core.BuildGateway(&gw, core.Inputs{}, core.Options{InferenceEnabled: true})
		if err != nil {
			b.Fatal(err)
		}
		out := map[string]proto.Message{}
		for _, l := range res.Listeners {
			out["lds/"+l.Name] = l
		}
		for _, r := range res.Routes {
			out["rds/"+r.Name] = r
		}
		for _, cl := range res.Clusters {
			out["cds/"+cl.Name] = cl
		}
		return out
	}
	before, after := build(a), build(c)
	n := 0
	for name, m := range after {
		if old, ok := before[name]; !ok || !proto.Equal(old, m) {
			n++
		}
	}
	return n
}
