// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package xdsbench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
	"github.com/infermesh/infermesh/pkg/test/controller"
	"github.com/infermesh/infermesh/pkg/test/kubeapply"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// startSizes are BenchmarkClusterModeStart's pool counts; each has
// startPodsPerPool ready pods per pool.
var startSizes = []int{1000, 3000, 10000}

const (
	startPodsPerPool = 10
	// loadWorkers create objects at once while loading the cluster.
	loadWorkers = 64
	// loadWait bounds each wait of the load phase (the EndpointSlice
	// controller's catch-up, the warm-up process's writes).
	loadWait = 30 * time.Minute
)

// BenchmarkClusterModeStart measures pilot-discovery's cluster-mode start
// (target: 10,000 pools ready in under 10 s, VmHWM under 1 GB) as a user
// runs it: the binary built from this checkout,
// its own process, a kubeconfig, default client rate limits. The cluster
// is loaded as hack/gen-pools.sh's folder is for file mode: the seed's
// namespaces, EPP (Deployment, Service, DestinationRule, one ready pod)
// and Gateway, and N InferencePools (pool-NNNN) with one HTTPRoute each
// (host pool-NNNN.example.com) and 10 ready pods each (pods created bound
// to the Node, their status written through the status subresource as a
// kubelet would), and each pool's shadow Service, applied as the
// controller applies it. Then a warm-up pilot-discovery (client rate limit
// 2,000 per second, so its writes do not take minutes) finds the shadow
// Services as desired and writes every status, kube-controller-manager's EndpointSlice
// controller writes each shadow Service's EndpointSlice (10 ready
// endpoints), and the warm-up process is stopped once quiet: the cluster
// a restarted or upgraded pilot-discovery finds.
//
// One op is one start on that cluster, timed from exec to the ADS client
// holding every pool's assignment with its 10 endpoints. Metrics, from
// exec: ready-s (/ready answers 200, polled every 10 ms), publish-s (the
// first ADS response a client connected at once reads), endpoints-s (the
// client holds all N pools' endpoints); hwm-publish-MiB (VmHWM then),
// cpu-publish-s (the process's CPU time then); and after that settled-s
// (until a 10 s window costs under 0.1 s of CPU: the leader's checks and
// writes at start are over), writes (objects the writers wrote, from their
// "writer: batch written" lines) and hwm-MiB (VmHWM at the end).
//
// Loading is latency-bound on a busy machine: at 10,000 pools one loaded
// machine's load took 35 minutes, and the warm-up's shadow Services and
// the EndpointSlice controller's slices came at 5-7 per second (see
// architecture/log/xds.md, "Cluster-mode start"); give -timeout hours.
//
// Each size loads a cluster of its own (nothing is kept between sizes)
// and -count repeats the start only. With XDSBENCH_PROFILE=DIR each start
// writes its CPU profile (--profile-cpu, exec to stop) and its heap
// profile at endpoints-s and its log into DIR. XDSBENCH_PILOTS=NAME=PATH,... starts
// those binaries instead, each a sub-benchmark (start/pilot=NAME) on the
// same cluster, for benchstat. Not part of make test:
//
//	make xdsbench XDSBENCH='ClusterModeStart/pools=1000$$/start' BENCHTIME=1x COUNT=3
//
// (make turns $$ into $, the regexp's end: pools=1000 alone would match
// pools=10000 too).
func BenchmarkClusterModeStart(b *testing.B) {
	bin := buildPilot(b)
	pilots := startPilots(b, bin)
	for _, n := range startSizes {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			kubeconfig := loadStartCluster(b, bin, n)
			run := 0
			measure := func(b *testing.B, name, bin string) {
				var sum startFigures
				for range b.N {
					run++
					sum.add(measureStart(b, bin, kubeconfig, n, fmt.Sprintf("%s%d", name, run)))
				}
				sum.report(b)
			}
			b.Run("start", func(b *testing.B) {
				if len(pilots) == 1 {
					measure(b, "", bin)
					return
				}
				for _, p := range pilots {
					b.Run("pilot="+p.name, func(b *testing.B) { measure(b, p.name+"-", p.bin) })
				}
			})
		})
	}
}

// namedPilot is a pilot-discovery binary to start.
type namedPilot struct{ name, bin string }

// startPilots are the binaries BenchmarkClusterModeStart starts: the one
// built from this checkout, or those of XDSBENCH_PILOTS
// ("NAME=PATH,NAME=PATH", for example main's and a change's), each a
// sub-benchmark pilot=NAME on the same loaded cluster.
func startPilots(b *testing.B, built string) []namedPilot {
	env := os.Getenv("XDSBENCH_PILOTS")
	if env == "" {
		return []namedPilot{{bin: built}}
	}
	var out []namedPilot
	for _, kv := range strings.Split(env, ",") {
		name, path, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			b.Fatalf("XDSBENCH_PILOTS %q: want NAME=PATH,NAME=PATH", env)
		}
		if _, err := os.Stat(path); err != nil {
			b.Fatalf("XDSBENCH_PILOTS: %v", err)
		}
		out = append(out, namedPilot{name, path})
	}
	return out
}

// loadStartCluster starts a cluster, loads it with n pools (see
// BenchmarkClusterModeStart), runs the warm-up pilot-discovery until the
// cluster is in its steady state, and returns the kubeconfig.
func loadStartCluster(b *testing.B, bin string, n int) string {
	b.Helper()
	drCRD, err := kubeenv.DestinationRuleCRD()
	if err != nil {
		b.Fatal(err)
	}
	// No audit log: it would hold a line per load request (over 200,000
	// at 10,000 pools) and slow the API server's writes.
	env := kubeenv.Start(b, kubeenv.WithStandardCRDs(), kubeenv.WithCRDs(drCRD),
		kubeenv.WithControllerManagerArgs(kcmLoadArgs...), kubeenv.WithAPIServerArgs("--audit-log-path="))
	admin, err := kube.NewFromRESTConfig(env.RESTConfig(), kube.WithQPS(clientQPS), kube.WithBurst(clientBurst))
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	loadSeed(b, env)
	loadPools(b, admin, n)
	loaded := time.Since(began)
	b.Logf("loaded %d pools, %d routes, %d pods in %v (%.0f objects/s)", n, n, n*startPodsPerPool,
		loaded.Round(time.Second), float64(n*(2+startPodsPerPool))/loaded.Seconds())
	kubeconfig := env.Kubeconfig
	warm := startPilotProcess(b, bin, kubeconfig, "--kube-qps=2000", "--kube-burst=4000")
	warm.waitReady(b, loadWait)
	waitSlices(b, admin.Kube(), n)
	b.Logf("shadow Services and EndpointSlices complete after %v", time.Since(began).Round(time.Second))
	warm.waitQuiet(b, loadWait)
	warm.Stop()
	b.Logf("cluster in steady state after %v", time.Since(began).Round(time.Second))
	return kubeconfig
}

// loadSeed applies the seed's namespaces, EPP and Gateway (the files
// hack/gen-pools.sh copies) and creates the EPP's ready pod.
func loadSeed(b *testing.B, env *kubeenv.Env) {
	b.Helper()
	a, err := kubeapply.New(env.RESTConfig(), "xdsbench")
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []string{"00-namespaces.yaml", "20-endpoint-picker.yaml", "40-gateway.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "seed", f))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.Apply(b.Context(), data); err != nil {
			b.Fatal(err)
		}
	}
	kc, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	epp := modelServerPod(seed.Namespace, seed.EPPName+"-0", map[string]string{"app": seed.EPPName})
	epp.Spec.Containers[0].Ports[0].ContainerPort = seed.EPPPort
	if _, err := kubeenv.CreateBoundReadyPod(b.Context(), kc, epp, "10.244.0.16"); err != nil {
		b.Fatal(err)
	}
}

// loadPools creates n pools' pods (first, so that each shadow Service's
// EndpointSlice is written once, complete), then the pools, their shadow
// Services (applied as the controller applies them) and routes.
func loadPools(b *testing.B, c *kube.Client, n int) {
	b.Helper()
	ctx, kc := b.Context(), c.Kube()
	parallelWith(b, loadWorkers, n*startPodsPerPool, func(k int) error {
		i, j := k/startPodsPerPool, k%startPodsPerPool
		name := poolName(i)
		pod := modelServerPod(seed.Namespace, fmt.Sprintf("%s-%d", name, j), map[string]string{"app": name})
		_, err := kubeenv.CreateBoundReadyPod(ctx, kc, pod, podIP(i, j))
		return err
	})
	parallelWith(b, loadWorkers, n, func(i int) error {
		name := poolName(i)
		pool := seed.InferencePool()
		pool.Name = name
		pool.Spec.Selector.MatchLabels = map[inferencev1.LabelKey]inferencev1.LabelValue{"app": inferencev1.LabelValue(name)}
		created, err := c.Inference().InferenceV1().InferencePools(seed.Namespace).Create(ctx, pool, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		// The shadow Service as the controller applies it: its writer
		// (4 workers, three requests each) would take most of an hour
		// at 10,000 pools on a busy machine.
		_, err = kc.CoreV1().Services(seed.Namespace).Apply(ctx, gateway.ShadowService(created),
			metav1.ApplyOptions{FieldManager: gateway.InferencePoolFieldManager, Force: true})
		if err != nil {
			return err
		}
		route := seed.HTTPRoute()
		route.Name = name
		route.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(routeHost(i))}
		route.Spec.Rules[0].BackendRefs[0].Name = gwv1.ObjectName(name)
		_, err = c.GatewayAPI().GatewayV1().HTTPRoutes(seed.Namespace).Create(ctx, route, metav1.CreateOptions{})
		return err
	})
}

// waitSlices waits until every pool's shadow Service has startPodsPerPool
// ready endpoints in kube-controller-manager's EndpointSlices.
func waitSlices(b *testing.B, kc kubernetes.Interface, n int) {
	b.Helper()
	deadline := time.Now().Add(loadWait)
	for {
		complete := 0
		for _, c := range readyEndpointsByService(b, kc) {
			if c == startPodsPerPool {
				complete++
			}
		}
		if complete >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d shadow Services have their %d ready endpoints after %v", complete, n, startPodsPerPool, loadWait)
		}
		time.Sleep(5 * time.Second)
	}
}

// readyEndpointsByService counts the ready endpoints of the
// EndpointSlice controller's slices in the seed namespace, by Service.
func readyEndpointsByService(b *testing.B, kc kubernetes.Interface) map[string]int {
	b.Helper()
	out := map[string]int{}
	opts := metav1.ListOptions{Limit: 2000, LabelSelector: discoveryv1.LabelManagedBy + "=endpointslice-controller.k8s.io"}
	for {
		list, err := kc.DiscoveryV1().EndpointSlices(seed.Namespace).List(b.Context(), opts)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					out[s.Labels[discoveryv1.LabelServiceName]]++
				}
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out
		}
	}
}

// startFigures are one start's measurements (or their sum over ops).
type startFigures struct {
	ready, publish, endpoints, settled time.Duration
	hwmPublish, hwm                    float64 // KiB
	cpuPublish                         float64 // s
	writes                             int
	n                                  int
}

func (f *startFigures) add(g startFigures) {
	f.ready += g.ready
	f.publish += g.publish
	f.endpoints += g.endpoints
	f.settled += g.settled
	f.hwmPublish += g.hwmPublish
	f.hwm += g.hwm
	f.cpuPublish += g.cpuPublish
	f.writes += g.writes
	f.n++
}

// report reports the means over the ops.
func (f *startFigures) report(b *testing.B) {
	n := float64(max(f.n, 1))
	b.ReportMetric(f.ready.Seconds()/n, "ready-s")
	b.ReportMetric(f.publish.Seconds()/n, "publish-s")
	b.ReportMetric(f.endpoints.Seconds()/n, "endpoints-s")
	b.ReportMetric(f.cpuPublish/n, "cpu-publish-s")
	b.ReportMetric(f.hwmPublish/1024/n, "hwm-publish-MiB")
	b.ReportMetric(f.hwm/1024/n, "hwm-MiB")
	b.ReportMetric(f.settled.Seconds()/n, "settled-s")
	b.ReportMetric(float64(f.writes)/n, "writes")
}

// measureStart is one op of BenchmarkClusterModeStart: it starts the
// process, times it, and stops it. The timer runs from exec to the
// client's complete endpoints.
func measureStart(b *testing.B, bin, kubeconfig string, n int, run string) startFigures {
	b.Helper()
	var extra []string
	profiles := os.Getenv("XDSBENCH_PROFILE")
	if profiles != "" {
		extra = append(extra, "--profile-cpu", filepath.Join(profiles, fmt.Sprintf("start-pools%d-%s.cpu.pprof", n, run)))
	}
	want := map[string]bool{}
	for i := range n {
		want[core.ClusterName(gateway.ShadowServiceBasePort, gateway.ShadowServiceName(poolName(i))+"."+seed.Namespace+".svc.cluster.local")] = true
	}
	b.StartTimer()
	p := startPilotProcess(b, bin, kubeconfig, extra...)
	defer p.Stop()
	w := watchStart(b, p.ads, want)
	ready := p.waitReady(b, loadWait)
	pid := p.cmd.Process.Pid
	first, complete := w.wait(b, loadWait)
	b.StopTimer()
	f := startFigures{
		ready: ready.Sub(p.began), publish: first.Sub(p.began), endpoints: complete.Sub(p.began),
		cpuPublish: cpuSeconds(b, pid), hwmPublish: procStatus(b, pid)["VmHWM"],
	}
	if profiles != "" {
		p.saveHeap(b, filepath.Join(profiles, fmt.Sprintf("start-pools%d-%s.heap.pprof", n, run)))
	}
	f.settled = p.waitQuiet(b, loadWait)
	f.hwm = procStatus(b, pid)["VmHWM"]
	for _, l := range p.logs.lines("writer: batch written") {
		if v, ok := l["written"].(float64); ok {
			f.writes += int(v)
		}
	}
	p.Stop()
	if profiles != "" {
		if err := os.WriteFile(filepath.Join(profiles, fmt.Sprintf("start-pools%d-%s.log", n, run)), []byte(p.logs.tail(64<<20)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("start %s at %d pools: ready %v, first ADS response %v, all endpoints %v (CPU %.2f s, VmHWM %.0f MiB); settled %v later (VmHWM %.0f MiB), %d objects written",
		run, n, f.ready.Round(time.Millisecond), f.publish.Round(time.Millisecond), f.endpoints.Round(time.Millisecond),
		f.cpuPublish, f.hwmPublish/1024, f.settled.Round(time.Second), f.hwm/1024, f.writes)
	return f
}

// startWatch is a delta ADS client of the seed Gateway's proxy, subscribed
// to every cluster and assignment (wildcard CDS and EDS), acking each
// response. It records when the first response came and when it first
// held every wanted assignment with startPodsPerPool endpoints.
type startWatch struct {
	first, complete chan time.Time
	errs            chan error
}

// watchStart dials addr and subscribes; the stream ends with the process.
func watchStart(b *testing.B, addr string, want map[string]bool) *startWatch {
	b.Helper()
	w := &startWatch{first: make(chan time.Time, 1), complete: make(chan time.Time, 1), errs: make(chan error, 1)}
	// The reading goroutine ends once the stream does (its cleanup, which
	// runs first).
	var wg sync.WaitGroup
	b.Cleanup(wg.Wait)
	// The process may not serve yet: wait for the connection rather than
	// fail the stream. Each response is acked as soon as it is read.
	node := controller.ProxyNode("start-proxy", seed.GatewayNamespace, seed.GatewayName)
	s := adsclient.NewDelta(b, dialADS(b, addr), node, adsclient.WaitForReady(), adsclient.AutoACK(),
		adsclient.NodeOnFirstOnly(), adsclient.Buffer(1024))
	for _, typ := range []string{resource.ClusterType, resource.EndpointType} {
		if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: typ}); err != nil {
			b.Fatal(err)
		}
	}
	wg.Go(func() { w.read(s, want) })
	return w
}

// read receives until the stream ends (each response acked as it is
// read).
func (w *startWatch) read(s *adsclient.Delta, want map[string]bool) {
	full := map[string]bool{}
	sentFirst, sentComplete := false, false
	for {
		r, at, err := s.RecvAt(time.Minute)
		if errors.Is(err, adsclient.ErrNoResponse) {
			continue
		}
		if err != nil {
			w.errs <- err
			return
		}
		if !sentFirst {
			w.first <- at
			sentFirst = true
		}
		if r.GetTypeUrl() != resource.EndpointType || sentComplete {
			continue
		}
		for _, res := range r.GetResources() {
			if !want[res.GetName()] {
				continue
			}
			cla := &endpointv3.ClusterLoadAssignment{}
			if err := res.GetResource().UnmarshalTo(cla); err != nil {
				w.errs <- fmt.Errorf("%s: %s: %w", s.Node().GetId(), res.GetName(), err)
				return
			}
			count := 0
			for _, l := range cla.GetEndpoints() {
				count += len(l.GetLbEndpoints())
			}
			if count == startPodsPerPool {
				full[res.GetName()] = true
			} else {
				delete(full, res.GetName())
			}
		}
		if len(full) == len(want) {
			w.complete <- at
			sentComplete = true
		}
	}
}

// wait returns when the first response came and when the endpoints were
// complete; it fails the benchmark after d or if the stream ends first.
func (w *startWatch) wait(b *testing.B, d time.Duration) (first, complete time.Time) {
	b.Helper()
	t := time.NewTimer(d)
	defer t.Stop()
	got := [2]time.Time{}
	for i, ch := range []chan time.Time{w.first, w.complete} {
		select {
		case got[i] = <-ch:
		case err := <-w.errs:
			b.Fatalf("ADS stream ended: %v", err)
		case <-t.C:
			b.Fatalf("ADS: no complete endpoints within %v", d)
		}
	}
	return got[0], got[1]
}
