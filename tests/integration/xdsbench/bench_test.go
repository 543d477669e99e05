// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package xdsbench benchmarks change-to-push latency of pilot-discovery
// against a real cluster (architecture/xds.md, "Figures against
// targets"): from an API server write
// that changes a pool's EndpointSlice or HTTPRoute to a proxy's delta ADS
// stream receiving the new ClusterLoadAssignment or RouteConfiguration. It
// is not part of make test; run it with
//
//	make xdsbench XDSBENCH=ChangeToPush COUNT=3
//
// which is
//
//	KUBE_TEST_BINARIES=$(hack/k8s-test-binaries.sh)/bin \
//	  go test -tags=integ -run '^$' -bench ChangeToPush -benchtime 100x -count 3 -timeout 300m ./tests/integration/xdsbench/
//
// BenchmarkClusterModeStart (start_test.go) times pilot-discovery's
// start against a loaded cluster, and BenchmarkPilotResources
// (resources_test.go) its memory and CPU.
package xdsbench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
	"github.com/infermesh/infermesh/pkg/test/controller"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// size is a BenchmarkChangeToPush case: how many InferencePools (one
// HTTPRoute each) on how many Gateways; pool i's route is on Gateway
// i%gateways.
type size struct{ pools, gateways int }

// defaultSize is the case the earlier figures are of; sizes are all the
// cases of BenchmarkChangeToPush.
var (
	defaultSize = size{pools: 1000, gateways: 10}
	sizes       = []size{defaultSize, {pools: 10000, gateways: 10}}
)

// kcmLoadArgs raise kube-controller-manager's client rate limit from its
// default 20 requests per second, at which writing the EndpointSlices of
// 10,000 new shadow Services alone would take over 8 minutes. It changes
// how fast the EndpointSlice controller catches up after set-up, not what
// it writes, nor any single change's path.
// --concurrent-service-endpoint-syncs (default 5) likewise: on a busy
// machine each sync waits for its request, and 5 workers wrote about 5
// slices a second.
var kcmLoadArgs = []string{"--kube-api-qps=2000", "--kube-api-burst=4000", "--concurrent-service-endpoint-syncs=50"}

const (
	// podsPerPool ready model-server pods per pool at the start; each pool
	// also has one extra pod, bound to the node but not ready, that the
	// benchmark marks ready (and, on a second visit, not ready).
	podsPerPool  = 2
	ns           = "bench"
	clientQPS    = 2000
	clientBurst  = 4000
	workersAdmin = 16
	// settle bounds the wait for the initial configuration; opWait one op.
	settle = 10 * time.Minute
	opWait = 30 * time.Second
)

// BenchmarkChangeToPush measures change-to-push latency through the real
// cluster, in each case of sizes (pools=1000/gateways=10, the earlier
// figures' case, and pools=10000/gateways=10), each with its own cluster:
// N InferencePools (2 ready pods each, plus one not-ready
// extra pod) with one HTTPRoute each, spread over the Gateways;
// pilot-discovery in process (bootstrap.NewServer, always leading, Debounce
// 1 ms, MaxDelay 10 ms), or with XDSBENCH_PILOT=process as its own process
// (the binary built from the checkout, the same flags, leading through its
// Lease), so that the benchmark's own decoding and validation of every
// response shares neither its heap nor its collector; one delta ADS client
// per Gateway subscribed to all of its EDS resources (wildcard), acking
// every response at once. Before
// timing, the setup waits until no stream has had a response for 3 s (the
// controller's status writes and the EndpointSlice controller's catch-up
// are over). Ops visit pools round robin; latency ends when the response
// is read off the stream.
//
// Two sub-benchmarks differ in the API server write that starts the clock:
//
//   - pod-status: a pod status write (kubeenv.SetPodReady flips a pool's
//     extra pod ready or not). The path is API server -> EndpointSlice
//     controller (kube-controller-manager) -> EndpointSlice watch ->
//     service registry -> xDS translation and push -> gRPC. A watch on the
//     EndpointSlices splits it: slice-p50-ms/slice-p99-ms up to the
//     EndpointSlice change, pilot-p50-ms/pilot-p99-ms from there to the
//     ADS response.
//   - endpointslice: an EndpointSlice write (see benchSliceWrite), an input
//     pilot-discovery watches itself: API server -> watch -> registry ->
//     translation and push -> gRPC.
//   - httproute: an HTTPRoute write (see benchRouteWrite), a configuration
//     change: API server -> watch -> route collections -> the Gateway's
//     translation (its N/gateways routes) -> RDS push -> gRPC.
//
// Metrics: p50-ms, p99-ms and max-ms (targets: p50 under 20 ms, p99 under
// 50 ms; the API server's own watch latency here is about 1.5 ms p50 and
// 5 ms p99).
//
// One case alone, for example the route write at 10,000 routes:
//
//	make xdsbench XDSBENCH='ChangeToPush/pools=10000/gateways=10/httproute' COUNT=3
func BenchmarkChangeToPush(b *testing.B) {
	// pilot-discovery logs through slog's default logger; its per-object
	// INFO lines during setup would drown the output.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	b.Cleanup(func() { slog.SetDefault(prev) })
	for _, sz := range sizes {
		b.Run(fmt.Sprintf("pools=%d", sz.pools), func(b *testing.B) {
			b.Run(fmt.Sprintf("gateways=%d", sz.gateways), func(b *testing.B) { changeToPush(b, sz) })
		})
	}
}

// changeToPush is one case of BenchmarkChangeToPush, on a cluster of its
// own.
func changeToPush(b *testing.B, sz size) {
	env := kubeenv.Start(b, kubeenv.WithStandardCRDs(), kubeenv.WithControllerManagerArgs(kcmLoadArgs...))
	admin, err := kube.NewFromRESTConfig(env.RESTConfig(), kube.WithQPS(clientQPS), kube.WithBurst(clientBurst))
	if err != nil {
		b.Fatal(err)
	}
	kc := admin.Kube()
	began := time.Now()
	extras := setUp(b, admin, sz)
	b.Logf("objects created in %v", time.Since(began).Round(time.Millisecond))

	conn := startChangeToPushPilot(b, env)
	clients := make([]*adsclient.Delta, sz.gateways)
	for g := range clients {
		clients[g] = newDeltaClient(b, conn, controller.ProxyNode(fmt.Sprintf("proxy-%d", g), seed.GatewayNamespace, gatewayName(g)))
	}
	// Initial configuration: every Gateway's proxy holds every one of its
	// pools' shadow assignments with podsPerPool endpoints.
	for g, c := range clients {
		want := map[string]bool{}
		for i := g; i < sz.pools; i += sz.gateways {
			want[shadowCluster(i)] = true
		}
		deadline := time.Now().Add(settle)
		for len(want) > 0 {
			r, _ := recv(b, c, time.Until(deadline))
			for _, res := range r.GetResources() {
				if want[res.GetName()] && len(addresses(b, res.GetResource())) == podsPerPool {
					delete(want, res.GetName())
				}
			}
		}
	}
	b.Logf("initial configuration on all %d proxies after %v", sz.gateways, time.Since(began).Round(time.Millisecond))
	// Let the controller's status writes and the EndpointSlice
	// controller's catch-up finish: no response on any stream for 3s.
	waitQuiet(b, clients)
	b.Logf("quiet after %v", time.Since(began).Round(time.Millisecond))
	// Whether each pool's extra pod is ready now; kept across -count runs.
	ready := make([]bool, sz.pools)
	b.Run("pod-status", func(b *testing.B) { benchPodStatus(b, kc, clients, extras, ready) })
	// The benchmark's own EndpointSlices are created by the first run of
	// the sub-benchmark and reused by the next (-count).
	var owned []*discoveryv1.EndpointSlice
	b.Run("endpointslice", func(b *testing.B) { owned = benchSliceWrite(b, kc, clients, owned, sz.pools) })
	b.Run("httproute", func(b *testing.B) { benchRouteWrite(b, admin.GatewayAPI(), clients, sz.pools) })
}

// benchPodStatus is the pod-status variant: each op flips one pool's extra
// pod with a pod status write, and kube-controller-manager's EndpointSlice
// controller turns that into an EndpointSlice change. ready is whether each
// extra pod is ready now (one per pool); the ops update it.
func benchPodStatus(b *testing.B, kc kubernetes.Interface, clients []*adsclient.Delta, extras []*corev1.Pod, ready []bool) {
	pools, gateways := len(ready), len(clients)
	ctx := b.Context()
	sliceWatcher := watchNew[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList](b, kc.DiscoveryV1().EndpointSlices(ns))
	lat := splitAt{at: "slice-"}
	i := 0
	for b.Loop() {
		pool := i % pools
		i++
		ready[pool] = !ready[pool]
		ip := extraIP(pool)
		start := time.Now()
		if _, err := kubeenv.SetPodReady(ctx, kc, extras[pool], ip, ready[pool]); err != nil {
			b.Fatal(err)
		}
		at := awaitAssignment(b, clients[pool%gateways], pool, ip, ready[pool])
		svc := gateway.ShadowServiceName(poolName(pool))
		lat.add(start, sliceWatcher.await(b, "EndpointSlice of "+svc, sliceHas(svc, ip, ready[pool])), at)
	}
	b.StopTimer()
	lat.report(b)
}

// benchSliceWrite is the endpointslice variant: the write is to an input
// pilot-discovery watches itself. Each pool gets a second EndpointSlice for
// its shadow Service, managed by this benchmark (label
// endpointslice.kubernetes.io/managed-by=bench.infermesh.io, which
// kube-controller-manager leaves alone, as it does any slice another
// controller manages), holding one endpoint (slice2IP) that starts not
// ready. One op flips that endpoint's ready condition with one Update, and
// latency runs from the Update call to the delta client reading the
// pool's assignment with the endpoint in it (or out of it).
func benchSliceWrite(b *testing.B, kc kubernetes.Interface, clients []*adsclient.Delta, owned []*discoveryv1.EndpointSlice, pools int) []*discoveryv1.EndpointSlice {
	ctx := b.Context()
	api := kc.DiscoveryV1().EndpointSlices(ns)
	gateways := len(clients)
	if owned == nil {
		owned = createBenchSlices(b, api, pools)
	}
	waitQuiet(b, clients)
	var lat []time.Duration
	i := 0
	for b.Loop() {
		pool := i % pools
		i++
		s := owned[pool].DeepCopy()
		ready := !*s.Endpoints[0].Conditions.Ready
		s.Endpoints[0].Conditions.Ready = &ready
		start := time.Now()
		updated, err := api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		owned[pool] = updated
		at := awaitAssignment(b, clients[pool%gateways], pool, slice2IP(pool), ready)
		lat = append(lat, at.Sub(start))
	}
	b.StopTimer()
	report(b, "", lat)
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	return owned
}

// benchRouteWrite is the httproute variant: the write is to a
// configuration object. Each op sets, with one JSON patch, a
// RequestHeaderModifier filter on one pool's HTTPRoute rule (header
// x-bench-op, a value unique to the op), and latency runs from the Patch
// call to the Gateway's delta client reading a RouteConfiguration whose
// virtual host for the pool's hostname carries that header. The route's
// status write that follows (observedGeneration) is not waited for. A
// watch on the HTTPRoutes splits it: watch-p50-ms/watch-p99-ms up to the
// watch event, pilot-p50-ms/pilot-p99-ms from there to the ADS response.
func benchRouteWrite(b *testing.B, gw gatewayclient.Interface, clients []*adsclient.Delta, pools int) {
	ctx := b.Context()
	gateways := len(clients)
	api := gw.GatewayV1().HTTPRoutes(ns)
	routeWatcher := watchNew[*gwv1.HTTPRoute, *gwv1.HTTPRouteList](b, api)
	waitQuiet(b, clients)
	run := time.Now().UnixNano()
	lat := splitAt{at: "watch-"}
	i := 0
	for b.Loop() {
		pool := i % pools
		value := fmt.Sprintf("%d-%d", run, i)
		i++
		patch := fmt.Sprintf(`[{"op":"add","path":"/spec/rules/0/filters","value":[`+
			`{"type":"RequestHeaderModifier","requestHeaderModifier":{"set":[{"name":%q,"value":%q}]}}]}]`, benchHeader, value)
		start := time.Now()
		if _, err := api.Patch(ctx, poolName(pool), types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		at := awaitRoute(b, clients[pool%gateways], routeHost(pool), value)
		lat.add(start, routeWatcher.await(b, "HTTPRoute "+poolName(pool), routeSets(poolName(pool), value)), at)
	}
	b.StopTimer()
	lat.report(b)
}

// benchHeader is the request header benchRouteWrite sets.
const benchHeader = "x-bench-op"

// awaitRoute reads c's responses until a RouteConfiguration (checked with
// ValidateAll) has, in the virtual host for host, a route that sets
// benchHeader to value, and returns when that response was read.
func awaitRoute(b *testing.B, c *adsclient.Delta, host, value string) time.Time {
	b.Helper()
	for {
		r, at := recv(b, c, opWait)
		if r.GetTypeUrl() != resource.RouteType {
			continue
		}
		rcs, err := adsclient.RouteConfigurations(adsclient.Resources(r))
		if err != nil {
			b.Fatal(err)
		}
		for _, rc := range rcs {
			if err := rc.ValidateAll(); err != nil {
				b.Fatalf("%s: %v", rc.GetName(), err)
			}
			for _, vh := range rc.GetVirtualHosts() {
				if !slices.Contains(vh.GetDomains(), host) {
					continue
				}
				for _, rt := range vh.GetRoutes() {
					for _, h := range rt.GetRequestHeadersToAdd() {
						if h.GetHeader().GetKey() == benchHeader && h.GetHeader().GetValue() == value {
							return at
						}
					}
				}
			}
		}
	}
}

// createBenchSlices creates, per pool, the benchmark's EndpointSlice for
// the pool's shadow Service (see benchSliceWrite) and returns them.
func createBenchSlices(b *testing.B, api discoveryclient.EndpointSliceInterface, pools int) []*discoveryv1.EndpointSlice {
	ctx := b.Context()
	owned := make([]*discoveryv1.EndpointSlice, pools)
	parallel(b, pools, func(i int) error {
		svc := gateway.ShadowServiceName(poolName(i))
		// The shadow Service's ports as kube-controller-manager wrote them,
		// so the registry maps the endpoint to the same Service port.
		list, err := api.List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("no EndpointSlice of %s", svc)
		}
		notReady := false
		s, err := api.Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-bench", Labels: map[string]string{
				discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "bench.infermesh.io",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       list.Items[0].Ports,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses: []string{slice2IP(i)}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady},
			}},
		}, metav1.CreateOptions{})
		owned[i] = s
		return err
	})
	return owned
}

// awaitAssignment reads c's responses until pool's shadow cluster
// assignment has ip:8000 in it (ready) or not, and returns when that
// response was read.
func awaitAssignment(b *testing.B, c *adsclient.Delta, pool int, ip string, ready bool) time.Time {
	b.Helper()
	for {
		r, at := recv(b, c, opWait)
		res := findResource(r, shadowCluster(pool))
		if res == nil {
			continue
		}
		if slices.Contains(addresses(b, res.GetResource()), net.JoinHostPort(ip, "8000")) == ready {
			return at
		}
	}
}

// splitAt collects each op's latency, from the write to the ADS response,
// split at the watch event of the written object: <at>p50-ms/<at>p99-ms
// up to the event, pilot-p50-ms/pilot-p99-ms from there.
type splitAt struct {
	at                   string
	total, before, after []time.Duration
}

func (s *splitAt) add(start, event, response time.Time) {
	s.total = append(s.total, response.Sub(start))
	s.before = append(s.before, event.Sub(start))
	s.after = append(s.after, response.Sub(event))
}

// report reports the percentiles of all three and the largest total as
// max-ms.
func (s *splitAt) report(b *testing.B) {
	report(b, "", s.total)
	b.ReportMetric(ms(s.total[len(s.total)-1]), "max-ms")
	report(b, s.at, s.before)
	report(b, "pilot-", s.after)
}

// report sorts d and reports its p50 and p99 as <name>p50-ms and <name>p99-ms.
func report(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(ms(percentile(d, 50)), name+"p50-ms")
	b.ReportMetric(ms(percentile(d, 99)), name+"p99-ms")
	b.Logf("%s%d samples: p50 %v, p99 %v, max %v", name, len(d), percentile(d, 50), percentile(d, 99), d[len(d)-1])
}

// waitQuiet returns once no client has read a response for 3 s.
func waitQuiet(b *testing.B, clients []*adsclient.Delta) {
	b.Helper()
	start := time.Now()
	for time.Since(lastResponse(clients)) < 3*time.Second {
		if time.Since(start) > settle {
			b.Fatal("xDS responses never stopped")
		}
		time.Sleep(100 * time.Millisecond)
		for _, c := range clients {
			c.Drain()
		}
	}
}

// objectWatch is a watch on one kind of object in the benchmark namespace;
// each event is stamped with the time it was read.
type objectWatch[T runtime.Object] struct {
	events chan stamped[T]
}

type stamped[T any] struct {
	obj T
	at  time.Time
}

// watchFrom stamps the events of w (started from a list's resourceVersion,
// so no initial events) until the benchmark ends.
func watchFrom[T runtime.Object](b *testing.B, w watch.Interface) *objectWatch[T] {
	ow := &objectWatch[T]{events: make(chan stamped[T], 1<<14)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(T); ok {
				ow.events <- stamped[T]{obj: o, at: time.Now()}
			}
		}
	}()
	b.Cleanup(func() { w.Stop(); <-done })
	return ow
}

// await returns when the first event for which match holds was read; what
// names it in the failure.
func (ow *objectWatch[T]) await(b *testing.B, what string, match func(T) bool) time.Time {
	b.Helper()
	t := time.NewTimer(opWait)
	defer t.Stop()
	for {
		select {
		case ev := <-ow.events:
			if match(ev.obj) {
				return ev.at
			}
		case <-t.C:
			b.Fatalf("no watch event of %s within %v", what, opWait)
		}
	}
}

// listWatcher is a typed client's List and Watch of one kind.
type listWatcher[L metav1.ListInterface] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// watchNew watches api's objects (of type T) from now on: a list, then a
// watch from the list's resourceVersion, so no initial events.
func watchNew[T runtime.Object, L metav1.ListInterface](b *testing.B, api listWatcher[L]) *objectWatch[T] {
	b.Helper()
	list, err := api.List(b.Context(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := api.Watch(b.Context(), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		b.Fatal(err)
	}
	return watchFrom[T](b, w)
}

// sliceHas reports whether the EndpointSlice is of Service service and
// shows ip with the given readiness.
func sliceHas(service, ip string, ready bool) func(*discoveryv1.EndpointSlice) bool {
	return func(s *discoveryv1.EndpointSlice) bool {
		if s.Labels[discoveryv1.LabelServiceName] != service {
			return false
		}
		for _, e := range s.Endpoints {
			r := e.Conditions.Ready != nil && *e.Conditions.Ready
			if slices.Contains(e.Addresses, ip) && r == ready {
				return true
			}
		}
		return false
	}
}

// routeSets reports whether the HTTPRoute is name and its first rule sets
// benchHeader to value.
func routeSets(name, value string) func(*gwv1.HTTPRoute) bool {
	return func(r *gwv1.HTTPRoute) bool {
		if r.Name != name || len(r.Spec.Rules) == 0 {
			return false
		}
		for _, f := range r.Spec.Rules[0].Filters {
			if f.RequestHeaderModifier == nil {
				continue
			}
			for _, h := range f.RequestHeaderModifier.Set {
				if string(h.Name) == benchHeader && h.Value == value {
					return true
				}
			}
		}
		return false
	}
}

// lastResponse is when any client last read a response.
func lastResponse(cs []*adsclient.Delta) time.Time {
	var last time.Time
	for _, c := range cs {
		if t := c.Last(); t.After(last) {
			last = t
		}
	}
	return last
}

// percentile is the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	k := (len(sorted)*p + 99) / 100
	return sorted[max(k, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func poolName(i int) string    { return fmt.Sprintf("pool-%04d", i) }
func routeHost(i int) string   { return poolName(i) + ".example.com" }
func gatewayName(g int) string { return fmt.Sprintf("gateway-%d", g) }

// shadowCluster is pool i's shadow Service cluster.
func shadowCluster(i int) string {
	return core.ClusterName(54321, gateway.ShadowServiceName(poolName(i))+"."+ns+".svc.cluster.local")
}

// podIP is the address of ready pod j of pool i; extraIP that of its extra
// pod.
func podIP(i, j int) string { return fmt.Sprintf("10.%d.%d.%d", 100+i/250, i%250, j+1) }
func extraIP(i int) string  { return fmt.Sprintf("10.%d.%d.200", 100+i/250, i%250) }

// slice2IP is the address of pool i's endpoint in the benchmark's own
// EndpointSlice.
func slice2IP(i int) string { return fmt.Sprintf("10.%d.%d.201", 100+i/250, i%250) }

// setUp creates the namespaces, sz's Gateways, the EPP Service and a ready
// EPP pod, and per pool the pool, its HTTPRoute (on Gateway i%gateways),
// podsPerPool ready pods and the extra pod, which it returns per pool.
func setUp(b *testing.B, c *kube.Client, sz size) []*corev1.Pod {
	pools, gateways := sz.pools, sz.gateways
	b.Helper()
	ctx := b.Context()
	kc := c.Kube()
	for _, n := range []string{ns, seed.GatewayNamespace} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for g := range gateways {
		gw := seed.Gateway()
		gw.Name = gatewayName(g)
		if _, err := c.GatewayAPI().GatewayV1().Gateways(seed.GatewayNamespace).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	epp := seed.EPPService()
	epp.Namespace = ns
	if _, err := kc.CoreV1().Services(ns).Create(ctx, epp, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := kubeenv.CreateReadyPods(ctx, kc, ns, "epp", map[string]string{"app": seed.EPPName}, seed.EPPPort, "10.99.0.1"); err != nil {
		b.Fatal(err)
	}
	extras := make([]*corev1.Pod, pools)
	parallel(b, pools, func(i int) error {
		name := poolName(i)
		pool := seed.InferencePool()
		pool.Namespace, pool.Name = ns, name
		pool.Spec.Selector.MatchLabels = map[inferencev1.LabelKey]inferencev1.LabelValue{"app": inferencev1.LabelValue(name)}
		if _, err := c.Inference().InferenceV1().InferencePools(ns).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
			return err
		}
		route := seed.HTTPRoute()
		route.Namespace, route.Name = ns, name
		route.Spec.ParentRefs[0].Name = gwv1.ObjectName(gatewayName(i % gateways))
		route.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(routeHost(i))}
		route.Spec.Rules[0].BackendRefs[0].Name = gwv1.ObjectName(name)
		if _, err := c.GatewayAPI().GatewayV1().HTTPRoutes(ns).Create(ctx, route, metav1.CreateOptions{}); err != nil {
			return err
		}
		labels := map[string]string{"app": name}
		for j := range podsPerPool {
			if _, err := kubeenv.CreateBoundReadyPod(ctx, kc, modelServerPod(ns, fmt.Sprintf("%s-%d", name, j), labels), podIP(i, j)); err != nil {
				return err
			}
		}
		// Bound to the node at creation, so that SetPodReady only writes
		// the status; without a pod IP it is in no EndpointSlice.
		extra := modelServerPod(ns, name+"-extra", labels)
		extra.Spec.NodeName = kubeenv.NodeName
		extra, err := kc.CoreV1().Pods(ns).Create(ctx, extra, metav1.CreateOptions{})
		extras[i] = extra
		return err
	})
	return extras
}

// modelServerPod is a model-server pod of a pool (labels), one container
// with port 8000 named http, its image never pulled.
func modelServerPod(namespace, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "vllm", Image: "example.invalid/vllm:never-pulled",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
		}}},
	}
}

// newDeltaClient opens a DeltaAggregatedResources stream with wildcard EDS
// and RDS subscriptions. Its reading goroutine stamps each response with
// the time it was read and acks it at once (adsclient.AutoACK), so the next
// change is never held back by the client.
func newDeltaClient(b *testing.B, conn *grpc.ClientConn, node *corev3.Node) *adsclient.Delta {
	b.Helper()
	c := adsclient.NewDelta(b, conn, node, adsclient.AutoACK(), adsclient.Buffer(1024))
	for _, typ := range []string{resource.EndpointType, resource.RouteType} {
		if err := c.Subscribe(typ); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// recv returns the next response and when it was read; it fails the
// benchmark when none comes within d or the stream ends.
func recv(b *testing.B, c *adsclient.Delta, d time.Duration) (*discoveryv3.DeltaDiscoveryResponse, time.Time) {
	b.Helper()
	r, at, err := c.RecvAt(d)
	if err != nil {
		b.Fatalf("%s: %v", c.Node().GetId(), err)
	}
	return r, at
}

func findResource(r *discoveryv3.DeltaDiscoveryResponse, name string) *discoveryv3.Resource {
	for _, res := range r.GetResources() {
		if res.GetName() == name {
			return res
		}
	}
	return nil
}

// addresses unpacks a ClusterLoadAssignment, checks it with ValidateAll, and
// lists its endpoints as address:port, sorted.
func addresses(b *testing.B, a *anypb.Any) []string {
	b.Helper()
	clas, err := adsclient.Assignments([]*anypb.Any{a})
	if err != nil {
		b.Fatal(err)
	}
	if err := clas[0].ValidateAll(); err != nil {
		b.Fatalf("%s: %v", clas[0].GetClusterName(), err)
	}
	return adsclient.Addresses(clas[0])
}

// parallel runs f(0..n-1), workersAdmin at a time, and fails on the first
// error.
func parallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	parallelWith(b, workersAdmin, n, f)
}

// parallelWith runs f(0..n-1), workers at a time, and fails on the first
// error.
func parallelWith(b *testing.B, workers, n int, f func(i int) error) {
	b.Helper()
	var g errgroup.Group
	g.SetLimit(workers)
	for i := range n {
		g.Go(func() error {
			if err := f(i); err != nil {
				return fmt.Errorf("%d: %w", i, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// startChangeToPushPilot starts pilot-discovery for BenchmarkChangeToPush,
// in this process or (XDSBENCH_PILOT=process) as its own, and returns a
// connection to its ADS server.
func startChangeToPushPilot(b *testing.B, env *kubeenv.Env) *grpc.ClientConn {
	b.Helper()
	switch mode := os.Getenv("XDSBENCH_PILOT"); mode {
	case "":
		return controller.StartPilot(b, env.RESTConfig(), time.Millisecond, 10*time.Millisecond, kube.WithQPS(clientQPS), kube.WithBurst(clientBurst))
	case "process":
		p := startPilotProcess(b, buildPilot(b), env.Kubeconfig, "--push-debounce", "1ms", "--push-max-delay", "10ms",
			"--kube-qps", fmt.Sprint(clientQPS), "--kube-burst", fmt.Sprint(clientBurst))
		return dialADS(b, p.ads)
	default:
		b.Fatalf("XDSBENCH_PILOT=%q: want empty (in process) or process", mode)
		return nil
	}
}
