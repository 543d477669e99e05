// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package traffic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/test/controller"
	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/eppproxy"
	"github.com/infermesh/infermesh/pkg/test/gwproxy"
	"github.com/infermesh/infermesh/pkg/test/kubeapply"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/seed"
	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

// Config is one run's configuration.
type Config struct {
	// Repo is the repository's root; the seed's manifests are read from its
	// examples/seed.
	Repo string
	// Out receives the demo's output; Log, when the run fails, the
	// harnesses' log lines (the components' logs among them).
	Out, Log io.Writer
	// EnvoyBinary, when set, is a real Envoy to run as the Gateway's data
	// plane instead of the project's stand-in.
	EnvoyBinary string
	// Requests is how many of the seed's requests to send while the EPP
	// runs (default 3).
	Requests int
}

// The seed's addresses (examples/seed/file-mode/pods.yaml): the
// model-server pods and the EPP pod.
var (
	modelServerIPs = []string{"10.244.0.13", "10.244.0.14", "10.244.0.15"}
	eppIP          = "10.244.0.16"
)

const (
	gatewayPort     = 80                  // the seed Gateway's listener
	waitConfig      = 60 * time.Second    // cluster -> pilot-discovery -> data plane
	waitEPP         = 60 * time.Second    // the EPP's pool and pod informers
	requestIDHeader = "x-demo-request-id" // the recording proxy's key of each request
	fieldManager    = "demo-traffic"      // our server-side apply identity
	userAgent       = "pilot-discovery-demo-traffic"
)

// NetNSPrefix starts the name of every network namespace the demo makes:
// one per pod, "<prefix><pid>-<last octet of the pod address>".
const NetNSPrefix = "imdemo-"

// ErrInterrupted is returned when ctx ended before the demo did.
var ErrInterrupted = errors.New("interrupted")

// Run runs the demo (see the package documentation) and stops everything
// it started before it returns, whether it succeeded, failed or ctx ended
// (Ctrl-C). The last line it prints says what was stopped and that no
// network namespace of its own is left, or what is.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Requests <= 0 {
		cfg.Requests = 3
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	r := newRunner()
	d := &demo{cfg: cfg, t: r, ctx: ctx, out: cfg.Out}
	// Say at once that a Ctrl-C was seen: the step under way (a process
	// starting, at most a minute's wait) ends first.
	ran := make(chan struct{})
	var said sync.WaitGroup
	said.Go(func() {
		select {
		case <-ctx.Done():
			d.printf("\ninterrupted: stopping what was started (after the step under way)")
		case <-ran:
		}
	})
	r.do(d.run)
	close(ran)
	said.Wait()
	runErr := r.err()
	if ctx.Err() != nil && !d.completed {
		runErr = ErrInterrupted
	} else if runErr != nil {
		d.printf("\nfailed: %v", runErr)
	}
	var cleaned atomic.Int64
	r.runCleanups(&cleaned)
	if err := r.err(); runErr == nil && err != nil {
		runErr = err // a cleanup failed
	}
	left, err := namespacesLeft(d.netnsNames())
	switch {
	case err != nil:
		runErr = errors.Join(runErr, err)
		d.printf("stopping: %d steps undone; could not list the network namespaces: %v", cleaned.Load(), err)
	case len(left) > 0:
		runErr = errors.Join(runErr, fmt.Errorf("network namespaces left: %s", strings.Join(left, ", ")))
		d.printf("stopping: %d steps undone, but network namespaces are left: %s (delete them with `ip netns del NAME`)",
			cleaned.Load(), strings.Join(left, ", "))
	case len(d.started()) == 0:
		d.printf("stopped everything it started (nothing was running yet; %d steps undone)", cleaned.Load())
	default:
		d.printf("stopped everything it started (%d steps undone: %s) and deleted its %d network namespaces",
			cleaned.Load(), strings.Join(d.started(), ", "), len(d.netnsNames()))
	}
	if runErr != nil && !errors.Is(runErr, ErrInterrupted) {
		r.writeLogs(cfg.Log) // the components' logs among them
	}
	return runErr
}

// demo is one run's state; its methods run on the runner's goroutine.
type demo struct {
	cfg Config
	t   *runner
	ctx context.Context
	out io.Writer

	completed bool // run returned after its last step

	mu      sync.Mutex
	netns   []string // names of the namespaces made
	running []string // what was started, in order

	kube   kubernetes.Interface
	pods   map[string]string // pod name -> ip:port
	byAddr map[string]string // ip:port -> pod name
	proxy  *eppproxy.Proxy
	gw     gwproxy.Proxy
	client *http.Client
}

func (d *demo) printf(format string, args ...any) {
	fmt.Fprintf(d.out, format+"\n", args...)
}

// check ends the run when ctx has ended (Ctrl-C): not a failure, so the
// harnesses' cleanups do not print their processes' logs.
func (d *demo) check() {
	if d.ctx.Err() != nil {
		runtime.Goexit()
	}
}

// fatalf ends the run as failed (as a test's Fatalf), unless ctx has ended,
// which is most likely why a step failed: then as check does.
func (d *demo) fatalf(format string, args ...any) {
	d.check()
	d.t.Fatalf(format, args...)
}

func (d *demo) must(err error, what string) {
	if err != nil {
		d.fatalf("%s: %v", what, err)
	}
}

func (d *demo) started() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.running)
}

func (d *demo) start(what string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.running = append(d.running, what)
}

func (d *demo) netnsNames() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.netns)
}

// waitFor polls cond until it holds, ctx ends (interrupted) or within
// passes (the run fails, naming what and describe's state).
func (d *demo) waitFor(within time.Duration, what string, cond func() bool, describe func() string) {
	deadline := time.Now().Add(within)
	for interval := 10 * time.Millisecond; !cond(); interval = min(2*interval, 250*time.Millisecond) {
		d.check()
		if time.Now().After(deadline) {
			msg := ""
			if describe != nil {
				msg = ": " + describe()
			}
			d.fatalf("%s: not reached within %v%s", what, within, msg)
		}
		select {
		case <-d.ctx.Done():
		case <-time.After(interval): // back-off of a bounded poll
		}
	}
}

func (d *demo) run() {
	t := d.t
	ctx := d.ctx
	seedDir := filepath.Join(d.cfg.Repo, "examples", "seed")

	// (1) The cluster. Both programs that route the seed's addresses (this
	// one and the GIE suite) lock them first: see kubeenv.LockAddresses.
	kubeenv.LockAddresses(t, append(slices.Clone(modelServerIPs), eppIP)...)
	d.check()
	dr, err := kubeenv.DestinationRuleCRD()
	d.must(err, "the DestinationRule CRD")
	objective, err := kubeenv.InferenceObjectiveCRD()
	d.must(err, "the InferenceObjective CRD")
	began := time.Now()
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs(), kubeenv.WithCRDs(dr, objective),
		kubeenv.WithControllers("deployment-controller", "replicaset-controller"))
	d.start("etcd, kube-apiserver, kube-controller-manager")
	d.printf("== cluster: etcd, kube-apiserver and kube-controller-manager %s on 127.0.0.1, up in %.1f s",
		kubeenv.KubernetesVersion, time.Since(began).Seconds())
	d.printf("   CRDs: Gateway API (standard), InferencePool, InferenceObjective, DestinationRule; no kubelet: this program plays it")
	d.check()
	restCfg := env.RESTConfig()
	d.kube = kubernetes.NewForConfigOrDie(restCfg)

	// (2) The seed's manifests, unchanged.
	a, err := kubeapply.New(restCfg, fieldManager)
	d.must(err, "apply")
	applied, err := a.ApplyDir(ctx, seedDir)
	d.must(err, "apply "+seedDir)
	d.printf("\n== kubectl apply --server-side -f examples/seed (unchanged):")
	for _, o := range applied {
		d.printf("   %s", o)
	}

	// (3) The pods the seed's Deployments create, each in a network
	// namespace of its own at the seed's address: a vLLM simulator per
	// model-server pod, configured from the pod's own arguments.
	models := d.waitPods("app="+seed.PoolName, len(modelServerIPs))
	eppPods := d.waitPods("app="+seed.EPPName, 1)
	d.pods, d.byAddr = map[string]string{}, map[string]string{}
	d.printf("\n== pods, each in its own network namespace (the ReplicaSets made them; this program plays the kubelet):")
	for i, pod := range models {
		ip := modelServerIPs[i]
		sc, err := SimConfigFromPod(pod)
		d.must(err, "pod "+pod.Name)
		ns := d.netnsFor(ip)
		addr := net.JoinHostPort(ip, strconv.Itoa(sc.Port))
		d.serveSim(ns, addr, sc.Config)
		_, err = kubeenv.SetPodReady(ctx, d.kube, &pod, ip, true)
		d.must(err, "pod "+pod.Name+" ready")
		d.pods[pod.Name], d.byAddr[addr] = addr, pod.Name
		d.printf("   %-36s %-17s vLLM simulator (pkg/test/vllmsim): model %s, LoRA %s  [netns %s]",
			pod.Name, addr, sc.Config.Model, strings.Join(sc.Config.LoRAs, ","), ns.Name)
	}
	d.check()

	// (4) pilot-discovery: the controllers and ADS, in this process.
	p := controller.StartGatewayPilot(t, restCfg, userAgent)
	d.start("pilot-discovery")

	// (5) The EPP the seed's Deployment names, lwepp, on loopback, serving
	// TLS with its own certificate; the recording proxy in front of it (TLS
	// both ways) reads each answer's pick; a relay in the EPP pod's namespace
	// makes it reachable at the pod's address.
	eppPod := eppPods[0]
	image := ""
	if cs := eppPod.Spec.Containers; len(cs) > 0 {
		image = cs[0].Image
	}
	eppLine, err := EPPLine(eppPod.Name, net.JoinHostPort(eppIP, strconv.Itoa(seed.EPPPort)), image, epp.LWEPPVersion)
	d.must(err, "the seed's EPP")
	e := epp.Start(t, epp.Config{Kind: epp.LWEPP, Kubeconfig: env.Kubeconfig,
		PoolNamespace: seed.Namespace, PoolName: seed.PoolName, TLS: true})
	d.start("the EPP")
	d.proxy, err = eppproxy.Start(context.Background(), eppproxy.Config{
		Upstream: e.Addr(), ServeTLS: true, RequestIDHeader: requestIDHeader,
		UpstreamTLS: &eppproxy.UpstreamTLS{InsecureSkipVerify: true},
	})
	d.must(err, "the recording proxy")
	t.Cleanup(d.proxy.Close)
	d.start("the recording proxy")
	eppAddr := net.JoinHostPort(eppIP, strconv.Itoa(seed.EPPPort))
	ns := d.netnsFor(eppIP)
	ns.Relay(t, eppAddr, d.proxy.Addr())
	_, err = kubeenv.SetPodReady(ctx, d.kube, &eppPod, eppIP, true)
	d.must(err, "pod "+eppPod.Name+" ready")
	d.printf("%s  [netns %s]", eppLine, ns.Name)
	d.printf("   %-36s %-17s (relayed to the recording proxy on %s, which forwards to the EPP on %s)", "", "", d.proxy.Addr(), e.Addr())
	d.check()

	// (6) The Gateway's data plane, booted from the bootstrap ConfigMap our
	// Gateway controller wrote.
	cmName := gateway.BootstrapConfigMapName(seed.GatewayName, seed.GatewayClass)
	var boot string
	d.waitFor(waitConfig, "the bootstrap ConfigMap "+cmName, func() bool {
		cm, err := d.kube.CoreV1().ConfigMaps(seed.GatewayNamespace).Get(ctx, cmName, metav1.GetOptions{})
		if err == nil {
			boot = cm.Data[gateway.BootstrapKey]
		}
		return boot != ""
	}, nil)
	d.printf("\n== pilot-discovery (in this process): ADS on %s (plaintext, loopback); it wrote the Gateway's bootstrap ConfigMap %s/%s",
		p.Addr(), seed.GatewayNamespace, cmName)
	if d.cfg.EnvoyBinary != "" {
		d.gw = gwproxy.StartEnvoy(t, d.cfg.EnvoyBinary, []byte(boot), gatewayPort, waitConfig)
		d.start("Envoy")
		d.printf("data plane: Envoy (%s, ENVOY_BINARY); the project's stand-in and how it compares: architecture/dataplane.md", d.cfg.EnvoyBinary)
		d.printf("   booted from that ConfigMap's bootstrap (admin and static listener ports moved to free loopback ports)")
	} else {
		d.gw = gwproxy.StartDataPlane(t, []byte(boot), gatewayPort, nil, waitConfig)
		d.start("the data plane")
		d.printf("data plane: the project's Envoy stand-in (pkg/test/dataplane, in this process), not Envoy; how it follows Envoy and where it differs: architecture/dataplane.md")
		d.printf("   booted from that ConfigMap's bootstrap, unmodified; ENVOY_BINARY=/path/to/envoy runs a real Envoy instead")
	}
	shadow := fmt.Sprintf("outbound|54321||%s.%s.svc.cluster.local", gateway.ShadowServiceName(seed.PoolName), seed.Namespace)
	eppCluster := fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", seed.EPPPort, seed.EPPName, seed.Namespace)
	want := slices.Sorted(maps.Values(d.pods))
	d.waitEndpoints(shadow, want)
	d.waitEndpoints(eppCluster, []string{eppAddr})
	d.printf("   listener %s (port %d); EDS: %s = %s; %s = %s", d.gw.Addr(), gatewayPort, shadow, strings.Join(want, ","), eppCluster, eppAddr)
	d.printPoolStatus(restCfg)
	d.printBodyMode(restCfg)

	// (7) The seed's request: first wait for the EPP's first pick (it picks
	// once its pod informer has the pool's ready pods).
	d.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	t.Cleanup(d.client.CloseIdleConnections)
	began = time.Now()
	probes := 0
	var last Result
	d.waitFor(waitEPP, "the EPP's first pick", func() bool {
		probes++
		last = d.send(probes, completion(), "probe")
		return last.Pick != ""
	}, func() string { return fmt.Sprintf("last %+v\nEPP log tail:\n%s", last, tail(e.Logs(), 3000)) })
	body, _ := json.Marshal(seedBody())
	d.printf("\n== the seed's request through the Gateway (the EPP's first pick came after %d probe requests, %.1f s):", probes, time.Since(began).Seconds())
	d.printf("   POST http://%s/v1/completions  Host: %s  %s", d.gw.Addr(), seed.Hostname, body)
	var errs []error
	for n := 1; n <= d.cfg.Requests; n++ {
		res := d.send(n, completion(), "request")
		line, err := PickLine(res)
		d.printf("%s", line)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		d.fatalf("%v", err)
	}

	// (8) FailOpen: the EPP stopped.
	e.Stop()
	d.check()
	n := d.cfg.Requests + 1
	d.printf("\n== the EPP stopped (its process ended; the recording proxy stays, so the data plane's ext_proc stream opens and then fails).")
	d.printf("   The pool is FailOpen: the request goes on, and override_host's fallback (round robin) picks a pod.")
	d.printf("   GET /health (no body: a FULL_DUPLEX_STREAMED body already sent to a failed EPP stream gets Envoy's 500, FailOpen or not)")
	var before int64 = -1
	dp, isDP := d.gw.(*gwproxy.DataPlane)
	if isDP {
		before = dp.DP.Counters().OverrideHostFallbacks
	}
	res := d.send(n, health(), "request")
	fallbacks := int64(-1)
	if isDP {
		fallbacks = dp.DP.Counters().OverrideHostFallbacks - before
	}
	line, err := FallbackLine(res, fallbacks)
	d.printf("%s", line)
	if err != nil {
		d.fatalf("%v", err)
	}
	d.printf("")
	d.completed = true
}

// waitPods waits for n pods matching selector in the seed's namespace and
// returns them sorted by name.
func (d *demo) waitPods(selector string, n int) []corev1.Pod {
	var pods []corev1.Pod
	d.waitFor(waitConfig, fmt.Sprintf("%d pods %s from the seed's Deployments", n, selector), func() bool {
		list, err := d.kube.CoreV1().Pods(seed.Namespace).List(d.ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false
		}
		pods = list.Items
		return len(pods) == n
	}, func() string { return fmt.Sprintf("%d pods", len(pods)) })
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// netnsFor makes the network namespace of the pod at ip.
func (d *demo) netnsFor(ip string) *kubeenv.NetNS {
	name := fmt.Sprintf("%s%d-%s", NetNSPrefix, os.Getpid(), ip[strings.LastIndexByte(ip, '.')+1:])
	d.mu.Lock()
	d.netns = append(d.netns, name)
	d.mu.Unlock()
	return kubeenv.NewNetNS(d.t, name, ip)
}

// serveSim serves a simulator at addr inside ns until the run ends.
func (d *demo) serveSim(ns *kubeenv.NetNS, addr string, cfg vllmsim.Config) {
	sim := vllmsim.New(cfg)
	ln, err := ns.Listen("tcp", addr)
	d.must(err, "simulator "+cfg.PodName)
	srv := &http.Server{Handler: sim}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	d.start("simulator " + cfg.PodName)
	// Registered after NewNetNS, so it runs before the namespace goes.
	d.t.Cleanup(func() {
		_ = sim.Close()
		_ = srv.Shutdown(context.Background())
		<-done
	})
}

func (d *demo) waitEndpoints(cluster string, want []string) {
	ctx, cancel := context.WithTimeout(d.ctx, waitConfig)
	defer cancel()
	if err := d.gw.WaitEndpoints(ctx, cluster, want); err != nil {
		d.fatalf("endpoints of %s never became %v: %v (last seen %v)", cluster, want, err, d.gw.Endpoints(cluster))
	}
}

// printPoolStatus waits for the InferencePool's Accepted and ResolvedRefs
// conditions, as our controller writes them for the seed's Gateway.
func (d *demo) printPoolStatus(cfg *rest.Config) {
	ic := inferenceclient.NewForConfigOrDie(cfg)
	var conds []string
	d.waitFor(waitConfig, "the InferencePool's status", func() bool {
		pool, err := ic.InferenceV1().InferencePools(seed.Namespace).Get(d.ctx, seed.PoolName, metav1.GetOptions{})
		if err != nil || len(pool.Status.Parents) == 0 {
			return false
		}
		conds = conds[:0]
		c := pool.Status.Parents[0].Conditions
		for _, typ := range []string{"Accepted", "ResolvedRefs"} {
			if cond := meta.FindStatusCondition(c, typ); cond != nil {
				conds = append(conds, typ+"="+string(cond.Status))
			}
		}
		return slices.Equal(conds, []string{"Accepted=True", "ResolvedRefs=True"})
	}, func() string { return strings.Join(conds, ", ") })
	d.printf("   InferencePool %s/%s status for Gateway %s/%s: %s", seed.Namespace, seed.PoolName,
		seed.GatewayNamespace, seed.GatewayName, strings.Join(conds, ", "))
}

// printBodyMode says which EPP body mode the seed Gateway's class gives:
// with no parametersRef (the class pilot-discovery creates) the EPP
// protocol's default, FULL_DUPLEX_STREAMED request and response bodies.
func (d *demo) printBodyMode(cfg *rest.Config) {
	gc, err := gatewayclient.NewForConfigOrDie(cfg).GatewayV1().GatewayClasses().Get(d.ctx, seed.GatewayClass, metav1.GetOptions{})
	d.must(err, "GatewayClass "+seed.GatewayClass)
	if ref := gc.Spec.ParametersRef; ref != nil {
		d.printf("   GatewayClass %s has parametersRef %s %s: its eppRequestBodyMode sets the EPP body mode", gc.Name, ref.Kind, ref.Name)
		return
	}
	d.printf("   GatewayClass %s has no parametersRef: the EPP body mode is the default, FULL_DUPLEX_STREAMED request and response bodies", gc.Name)
}

// request is one request to the Gateway.
type request struct {
	method, path string
	body         []byte
}

// seedBody is the seed's request body.
func seedBody() map[string]any {
	return map[string]any{"model": seed.RequestModel, "prompt": seed.Prompt, "max_tokens": 100, "temperature": 0}
}

func completion() request {
	b, _ := json.Marshal(seedBody())
	return request{method: http.MethodPost, path: "/v1/completions", body: b}
}

func health() request { return request{method: http.MethodGet, path: "/health"} }

// send sends r to the Gateway (Host llm.ssup2.com, a request id the
// recording proxy keys its record by) and returns what came back and what
// the EPP answered.
func (d *demo) send(n int, r request, kind string) Result {
	res := Result{N: n}
	id := fmt.Sprintf("%s-%d", kind, n)
	req, err := http.NewRequestWithContext(d.ctx, r.method, "http://"+d.gw.Addr()+r.path, bytes.NewReader(r.body))
	if err != nil {
		res.Err = err
		return res
	}
	if r.body == nil {
		req.Body, req.ContentLength = nil, 0
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Host = seed.Hostname
	req.Header.Set(requestIDHeader, id)
	resp, err := d.client.Do(req)
	if err != nil {
		res.Err = err
		return res
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	res.Status = resp.StatusCode
	res.Pod, res.Port = resp.Header.Get(vllmsim.PodHeader), resp.Header.Get(vllmsim.PortHeader)
	res.Addr = d.pods[res.Pod]
	// The stream ends as the request does; its record may trail by a moment.
	deadline := time.Now().Add(2 * time.Second)
	for {
		rec, ok := d.proxy.Record(id)
		if ok {
			res.Pick, res.PickPod = rec.PickedMetadata, d.byAddr[rec.PickedMetadata]
			res.Stream = "open"
			if rec.Done {
				res.Stream = rec.Code.String()
			}
		}
		if (ok && rec.Done) || time.Now().After(deadline) {
			return res
		}
		time.Sleep(10 * time.Millisecond) // back-off of a bounded poll
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
