// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/test/controller"
	"github.com/infermesh/infermesh/pkg/test/dataplane"
	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

// BenchmarkEPPPath measures the EPP path: the seed's request (POST
// /v1/completions, model reviews-1, a prompt of its own each time) through
// the test data plane, whose ext_proc stream goes to the full EPP (GIE
// v1.0.0, plaintext) on loopback, to the picked simulator; against the same
// request sent straight to a simulator (round robin over the three pods).
// For 1, 10 and 50 concurrent clients (keep-alive connections, both paths
// alike) it reports:
//
//   - rps: requests per second through the Gateway;
//   - p50-ms, p99-ms: latency through the Gateway;
//   - direct-p50-ms, direct-p99-ms: latency straight to a simulator, same
//     concurrency and count (timer stopped);
//   - added-p50-ms, added-p99-ms: the difference, the EPP path's cost.
//
// The world is the seed's (kube-apiserver, pilot-discovery in process,
// three simulators in a network namespace, the full EPP), without the
// recording proxy and the byte relay the tests use: the data plane dials the
// EPP pod's address straight to the EPP's loopback port. It is a Benchmark,
// so `make test` (no -bench) never runs it:
//
//	KUBE_TEST_BINARIES=... EPP_TEST_BINARIES=... nice -n 10 go test -tags=integ \
//	  -run '^$' -bench '^BenchmarkEPPPath$' -benchtime 2000x ./tests/integration/pilot/gie/
func BenchmarkEPPPath(b *testing.B) {
	w := newBenchWorld(b)
	for _, clients := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			var seq atomic.Int64
			via := func() error {
				return w.post(b.Context(), "http://"+w.gwAddr+"/v1/completions", seq.Add(1))
			}
			pods := []string{pod13, pod14, pod15}
			direct := func() error {
				n := seq.Add(1)
				return w.post(b.Context(), "http://"+ep(pods[n%3])+"/v1/completions", n)
			}
			before := w.dp.Counters()
			b.ResetTimer()
			start := time.Now()
			gw, err := runLoad(b.N, clients, via)
			elapsed := time.Since(start)
			b.StopTimer()
			if err != nil {
				b.Fatalf("through the Gateway: %v", err)
			}
			// Every measured request took the EPP's pick: none fell back.
			if c := w.dp.Counters(); c.OverrideHostFallbacks != before.OverrideHostFallbacks || c.ExtProcFailuresAllowed != before.ExtProcFailuresAllowed {
				b.Fatalf("%d override_host fallbacks, %d ext_proc failures allowed while measuring: not the EPP path",
					c.OverrideHostFallbacks-before.OverrideHostFallbacks, c.ExtProcFailuresAllowed-before.ExtProcFailuresAllowed)
			}
			d, err := runLoad(b.N, clients, direct)
			if err != nil {
				b.Fatalf("direct: %v", err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rps")
			b.ReportMetric(ms(pct(gw, 50)), "p50-ms")
			b.ReportMetric(ms(pct(gw, 99)), "p99-ms")
			b.ReportMetric(ms(pct(d, 50)), "direct-p50-ms")
			b.ReportMetric(ms(pct(d, 99)), "direct-p99-ms")
			b.ReportMetric(ms(pct(gw, 50)-pct(d, 50)), "added-p50-ms")
			b.ReportMetric(ms(pct(gw, 99)-pct(d, 99)), "added-p99-ms")
		})
	}
}

// runLoad runs n calls of do over clients goroutines and returns each
// call's latency, sorted; the first error stops it.
func runLoad(n, clients int, do func() error) ([]time.Duration, error) {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		lat   = make([]time.Duration, 0, n)
		first error
		wg    sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				err := do()
				d := time.Since(t0)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				lat = append(lat, d)
				stop := first != nil
				mu.Unlock()
				if stop {
					return
				}
			}
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, first
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchWorld is the seed's world for the benchmark (newHarness is bound to
// *testing.T).
type benchWorld struct {
	dp     *dataplane.DataPlane
	gwAddr string
	client *http.Client
}

// post sends the seed's request with prompt number n to url and checks for
// a complete 200 from a simulator.
func (w *benchWorld) post(ctx context.Context, url string, n int64) error {
	r := completion(fmt.Sprintf("bench %d. %s", n, seedPrompt))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(r.Body))
	if err != nil {
		return err
	}
	req.Host = seed.Hostname
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get(vllmsim.PodHeader) == "" {
		return fmt.Errorf("%s: status %d pod %q body %.200q", url, resp.StatusCode, resp.Header.Get(vllmsim.PodHeader), body)
	}
	return nil
}

func newBenchWorld(b *testing.B) *benchWorld {
	b.Helper()
	ctx := b.Context()
	objective, err := kubeenv.InferenceObjectiveCRD()
	if err != nil {
		b.Fatal(err)
	}
	env := kubeenv.Start(b, kubeenv.WithStandardCRDs(), kubeenv.WithCRDs(objective))
	cfg := env.RESTConfig()
	kc := kubernetes.NewForConfigOrDie(cfg)
	gc := gatewayclient.NewForConfigOrDie(cfg)
	ic := inferenceclient.NewForConfigOrDie(cfg)

	// Simulators in a network namespace (the full EPP scrapes them there).
	pods := []string{pod13, pod14, pod15}
	kubeenv.LockAddresses(b, pods...) // see newHarness
	ns := kubeenv.NewNetNS(b, netnsName(), pods...)
	for _, ip := range pods {
		sim := vllmsim.New(vllmsim.Config{PodName: podName(ip), Model: baseModel, LoRAs: []string{loraModel}, MaxLoRAs: 2})
		ln, err := ns.Listen("tcp", ep(ip))
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: sim}
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(ln) }()
		b.Cleanup(func() { _ = sim.Close(); _ = srv.Shutdown(context.Background()); <-done })
	}

	// The seed's objects.
	for _, n := range []string{seed.Namespace, seed.GatewayNamespace} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	ready := func(pod *corev1.Pod, ip string) {
		if _, err := kc.CoreV1().Pods(seed.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := kubeenv.SetPodReady(ctx, kc, pod, ip, true); err != nil {
			b.Fatal(err)
		}
	}
	for _, ip := range pods {
		ready(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: podName(ip), Labels: map[string]string{"app": seed.PoolName}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm-sim", Image: "example.invalid/sim:never-pulled",
				Ports: []corev1.ContainerPort{{Name: "http-0", ContainerPort: 8000}}}}},
		}, ip)
	}
	ready(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: seed.EPPName + "-0", Labels: map[string]string{"app": seed.EPPName}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "epp", Image: "example.invalid/epp:never-pulled",
			Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: seed.EPPPort}}}}},
	}, eppIP)
	if _, err := kc.CoreV1().Services(seed.Namespace).Create(ctx, seed.EPPService(), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := gc.GatewayV1().Gateways(seed.GatewayNamespace).Create(ctx, seed.Gateway(), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := ic.InferenceV1().InferencePools(seed.Namespace).Create(ctx, seed.InferencePool(), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := gc.GatewayV1().HTTPRoutes(seed.Namespace).Create(ctx, seed.HTTPRoute(), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}

	// pilot-discovery, as newHarness runs it.
	controller.StartGatewayPilot(b, cfg, pilotUserAgent)

	// The full EPP on loopback.
	e := epp.Start(b, epp.Config{Kind: epp.FullEPP, Kubeconfig: env.Kubeconfig, PoolNamespace: seed.Namespace, PoolName: seed.PoolName})

	// The data plane from the bootstrap ConfigMap; the EPP pod's address is
	// dialled to the EPP's loopback port.
	name := gateway.BootstrapConfigMapName(seed.GatewayName, seed.GatewayClass)
	var boot string
	poll.Until(b, waitConfig, "the bootstrap ConfigMap", func() bool {
		cm, err := kc.CoreV1().ConfigMaps(seed.GatewayNamespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			boot = cm.Data[gateway.BootstrapKey]
		}
		return boot != ""
	})
	eppAddr := net.JoinHostPort(eppIP, strconv.Itoa(seed.EPPPort))
	var d net.Dialer
	dp, err := dataplane.New([]byte(boot), dataplane.Options{
		ListenerAddress: func(uint32) string { return "127.0.0.1:0" },
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == eppAddr {
				addr = e.Addr()
			}
			return d.DialContext(ctx, network, addr)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	dctx, dcancel := context.WithCancel(context.Background())
	ddone := make(chan error, 1)
	go func() { ddone <- dp.Run(dctx) }()
	b.Cleanup(func() { dcancel(); <-ddone })
	wctx, wcancel := context.WithTimeout(ctx, waitConfig)
	defer wcancel()
	want := []string{ep(pod13), ep(pod14), ep(pod15)}
	if err := dp.WaitFor(wctx, func(s dataplane.Snapshot) bool {
		return dp.Addr(gwPort) != nil && slices.Equal(slices.Sorted(slices.Values(s.Endpoints[shadowCluster])), want) &&
			len(s.Endpoints[eppCluster]) == 1
	}); err != nil {
		b.Fatalf("data plane never ready: %v", err)
	}
	w := &benchWorld{dp: dp, gwAddr: dp.Addr(gwPort).String(), client: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 256},
		Timeout:   30 * time.Second,
	}}
	b.Cleanup(w.client.CloseIdleConnections)

	// The full EPP picks once it has scraped the pods: wait for a 200 with
	// a pick (bounded), and only then measure.
	var last error
	poll.UntilOr(b, waitEPP, "the full EPP's first pick", func() bool {
		last = w.post(ctx, "http://"+w.gwAddr+"/v1/completions", 0)
		return last == nil && dp.Counters().OverrideHostFallbacks == 0
	}, func() string { return fmt.Sprintf("last: %v, fallbacks %d", last, dp.Counters().OverrideHostFallbacks) })
	return w
}
