// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/controller"
	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/eppproxy"
	"github.com/infermesh/infermesh/pkg/test/gwproxy"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

// The seed's addresses (examples/seed/file-mode/pods.yaml): three
// model-server pods and the EPP pod.
const (
	pod13  = "10.244.0.13"
	pod14  = "10.244.0.14"
	pod15  = "10.244.0.15"
	eppIP  = "10.244.0.16"
	pod17  = "10.244.0.17" // a spare address for pods a test adds later
	gwPort = 80            // the seed Gateway's listener port
)

// pilotUserAgent marks pilot-discovery's requests in the audit log
// (controller.StartGatewayPilot runs it in process).
const pilotUserAgent = "pilot-discovery-gie-integ"

// Bounds of the waits on real asynchrony (informers, pushes, EPP watches).
const (
	waitConfig = 60 * time.Second // cluster -> pilot -> data plane
	waitEPP    = 60 * time.Second // EPP informers and, for the full EPP, its first scrapes
)

// Cluster and model names.
var (
	shadowCluster = "outbound|54321||" + gateway.ShadowServiceName(seed.PoolName) + "." + seed.Namespace + ".svc.cluster.local"
	eppCluster    = fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", seed.EPPPort, seed.EPPName, seed.Namespace)
)

const (
	baseModel = "meta-llama/Llama-3.1-8B-Instruct" // the seed's --model
	loraModel = seed.RequestModel                  // the seed's --lora-modules and request model
)

// options describe one scenario's world. The zero value is the seed with
// the lightweight EPP over plaintext.
type options struct {
	// EPP is the endpoint picker to run (default epp.LWEPP).
	EPP epp.Kind
	// TLS puts the seed's DestinationRule (SIMPLE, insecureSkipVerify) on the
	// EPP Service: the EPP (and the recording proxy) then serve TLS.
	TLS bool
	// TargetPorts of the pool (default the seed's 8000). Every simulator
	// listens on each.
	TargetPorts []int32
	// ReadyPods are the addresses of the pool's pods made ready at the start
	// (default the seed's three).
	ReadyPods []string
	// SpareIPs have simulators listening from the start, but no pod object:
	// a test creates them with harness.createPod.
	SpareIPs []string
	// Sim adjusts every simulator's configuration.
	Sim func(*vllmsim.Config)
	// OtherIPs are more addresses of the network namespace, with nothing
	// listening: a test serves what it needs there (an authorization
	// server).
	OtherIPs []string
	// ExperimentalCRDs installs the Gateway API's experimental channel
	// instead of the standard one (fields such as an HTTPRoute's
	// ExternalAuth filter exist only there).
	ExperimentalCRDs bool
	// ExternalProcessorCRD installs the chart's infermesh.io
	// ExternalProcessor CRD (what a listener filter's ExtensionRef names).
	ExternalProcessorCRD bool
}

// processorCRD is the chart's ExternalProcessor CRD, installed as the chart
// installs it.
const processorCRD = "../../../../manifests/charts/infermesh/crds/infermesh.io_externalprocessors.yaml"

func (o *options) defaults() {
	if o.EPP == "" {
		o.EPP = epp.LWEPP
	}
	if len(o.TargetPorts) == 0 {
		o.TargetPorts = []int32{8000}
	}
	if o.ReadyPods == nil {
		o.ReadyPods = []string{pod13, pod14, pod15}
	}
}

// harness is one test's world: cluster, pilot-discovery, simulators, EPP
// behind the recording proxy, and the Gateway proxy.
type harness struct {
	t    *testing.T
	opts options

	env       *kubeenv.Env
	kube      kubernetes.Interface
	gateways  gatewayclient.Interface
	inference inferenceclient.Interface
	dynamic   dynamic.Interface

	netns *kubeenv.NetNS
	sims  map[string]*vllmsim.Server // by pod IP
	pilot *controller.GatewayPilot
	epp   *epp.Process
	proxy *eppproxy.Proxy // the recording proxy: the oracle of every pick
	gw    gwproxy.Proxy
}

// newHarness builds the world of opts, in dependency order, and returns once
// the Gateway proxy routes the seed's host to the pool and the EPP answers a
// first request with a pick. Everything is torn down by t.Cleanup.
func newHarness(t *testing.T, opts options) *harness {
	t.Helper()
	opts.defaults()
	h := &harness{t: t, opts: opts, sims: map[string]*vllmsim.Server{}}
	ctx := t.Context()

	// (1) The cluster, with the Gateway API standard CRDs and the
	// InferencePool CRD, plus the DestinationRule CRD (the seed's TLS) and
	// the InferenceObjective CRD the full EPP watches.
	dr, err := kubeenv.DestinationRuleCRD()
	if err != nil {
		t.Fatal(err)
	}
	objective, err := kubeenv.InferenceObjectiveCRD()
	if err != nil {
		t.Fatal(err)
	}
	crds := kubeenv.WithStandardCRDs()
	if opts.ExperimentalCRDs {
		gwapi, err := kubeenv.GatewayAPIExperimentalCRDs()
		if err != nil {
			t.Fatal(err)
		}
		pool, err := kubeenv.InferencePoolCRD()
		if err != nil {
			t.Fatal(err)
		}
		crds = kubeenv.WithCRDs(append(gwapi, pool)...)
	}
	extra := []string{dr, objective}
	if opts.ExternalProcessorCRD {
		extra = append(extra, processorCRD)
	}
	h.env = kubeenv.Start(t, crds, kubeenv.WithCRDs(extra...))
	cfg := h.env.RESTConfig()
	h.kube = kubernetes.NewForConfigOrDie(cfg)
	h.gateways = gatewayclient.NewForConfigOrDie(cfg)
	h.inference = inferenceclient.NewForConfigOrDie(cfg)
	h.dynamic = dynamic.NewForConfigOrDie(cfg)

	// (2) Pod addresses in a network namespace; a simulator per pod on every
	// target port.
	// The demo (tests/integration/demotraffic) routes the seed's addresses
	// too; the address locks make the two take turns (architecture/ci.md).
	ips := slices.Concat(opts.ReadyPods, opts.SpareIPs, opts.OtherIPs, []string{eppIP})
	kubeenv.LockAddresses(t, ips...)
	h.netns = kubeenv.NewNetNS(t, netnsName(), ips...)
	for _, ip := range slices.Concat(opts.ReadyPods, opts.SpareIPs) {
		h.startSim(ip)
	}

	// (3) The seed's objects: namespaces, pods, EPP pod and Service, the
	// DestinationRule, Gateway, InferencePool and HTTPRoute.
	for _, ns := range []string{seed.Namespace, seed.GatewayNamespace} {
		if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ip := range opts.ReadyPods {
		h.createPod(ip, true)
	}
	h.createEPPObjects()
	if _, err := h.gateways.GatewayV1().Gateways(seed.GatewayNamespace).Create(ctx, seed.Gateway(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pool := seed.InferencePool()
	pool.Spec.TargetPorts = nil
	for _, p := range opts.TargetPorts {
		pool.Spec.TargetPorts = append(pool.Spec.TargetPorts, inferencev1.Port{Number: inferencev1.PortNumber(p)})
	}
	if _, err := h.inference.InferenceV1().InferencePools(seed.Namespace).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.gateways.GatewayV1().HTTPRoutes(seed.Namespace).Create(ctx, seed.HTTPRoute(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// (4) pilot-discovery, which writes the Gateway's bootstrap ConfigMap.
	h.pilot = controller.StartGatewayPilot(t, cfg, pilotUserAgent)

	// (5) The EPP on loopback, the recording proxy in front of it, and the
	// EPP pod's address relayed to the proxy.
	h.epp = epp.Start(t, epp.Config{
		Kind: opts.EPP, Kubeconfig: h.env.Kubeconfig, PoolNamespace: seed.Namespace, PoolName: seed.PoolName, TLS: opts.TLS,
	})
	pc := eppproxy.Config{Upstream: h.epp.Addr(), ServeTLS: opts.TLS}
	if opts.TLS {
		pc.UpstreamTLS = &eppproxy.UpstreamTLS{InsecureSkipVerify: true}
	}
	if h.proxy, err = eppproxy.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.proxy.Close)
	h.netns.Relay(t, net.JoinHostPort(eppIP, strconv.Itoa(seed.EPPPort)), h.proxy.Addr())

	// (6) The Gateway proxy from the bootstrap ConfigMap, unmodified.
	boot := h.bootstrapJSON()
	if bin := os.Getenv("ENVOY_BINARY"); bin != "" {
		h.gw = gwproxy.StartEnvoy(t, bin, boot, gwPort, waitConfig)
	} else {
		h.gw = gwproxy.StartDataPlane(t, boot, gwPort, debugLogger(), waitConfig)
	}
	var want []string
	for _, ip := range opts.ReadyPods {
		want = append(want, h.endpoints(ip)...)
	}
	h.waitEndpoints(shadowCluster, want)
	h.waitEndpoints(eppCluster, []string{net.JoinHostPort(eppIP, strconv.Itoa(seed.EPPPort))})
	return h
}

// netnsName names the test's network namespace: unique per test process
// (tests in this package run one at a time).
func netnsName() string { return fmt.Sprintf("gie-%d", os.Getpid()) }

// podName is the name of the pool's pod at ip ("vllm-llama3-8b-13" for
// 10.244.0.13): the simulator sends it as x-inference-pod.
func podName(ip string) string {
	return seed.PoolName + "-" + ip[strings.LastIndexByte(ip, '.')+1:]
}

// endpoints are the pool's endpoints of the pod at ip: one per target port.
func (h *harness) endpoints(ip string) []string {
	var out []string
	for _, p := range h.opts.TargetPorts {
		out = append(out, net.JoinHostPort(ip, strconv.Itoa(int(p))))
	}
	return out
}

// createPod creates the pool's pod at ip (labels the pool selects, a
// container port per target port) and plays the kubelet: bound, running,
// with the IP, Ready as given.
func (h *harness) createPod(ip string, ready bool) {
	h.t.Helper()
	var ports []corev1.ContainerPort
	for i, p := range h.opts.TargetPorts {
		ports = append(ports, corev1.ContainerPort{Name: fmt.Sprintf("http-%d", i), ContainerPort: p})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: podName(ip), Labels: map[string]string{"app": seed.PoolName}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "vllm-sim", Image: "example.invalid/llm-d-inference-sim:never-pulled", Ports: ports,
		}}},
	}
	h.createReadyPod(pod, ip, ready)
}

func (h *harness) createReadyPod(pod *corev1.Pod, ip string, ready bool) {
	h.t.Helper()
	ctx := h.t.Context()
	pod, err := h.kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := kubeenv.SetPodReady(ctx, h.kube, pod, ip, ready); err != nil {
		h.t.Fatal(err)
	}
}

// setPodReady plays the kubelet for the pool's pod at ip.
func (h *harness) setPodReady(ip string, ready bool) {
	h.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: podName(ip)}}
	if _, err := kubeenv.SetPodReady(h.t.Context(), h.kube, pod, ip, ready); err != nil {
		h.t.Fatal(err)
	}
}

// deletePod removes the pool's pod at ip at once (grace period 0: there is
// no kubelet to confirm a graceful stop).
func (h *harness) deletePod(ip string) {
	h.t.Helper()
	if err := h.kube.CoreV1().Pods(seed.Namespace).Delete(h.t.Context(), podName(ip),
		metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		h.t.Fatal(err)
	}
}

// createEPPObjects creates the EPP's pod (ready at 10.244.0.16) and the
// seed's EPP Service, and, with TLS, the seed's DestinationRule.
func (h *harness) createEPPObjects() {
	h.t.Helper()
	ctx := h.t.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: seed.EPPName + "-0", Labels: map[string]string{"app": seed.EPPName}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "epp", Image: "example.invalid/epp:never-pulled",
			Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: seed.EPPPort}},
		}}},
	}
	h.createReadyPod(pod, eppIP, true)
	if _, err := h.kube.CoreV1().Services(seed.Namespace).Create(ctx, seed.EPPService(), metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	if !h.opts.TLS {
		return
	}
	dr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1",
		"kind":       "DestinationRule",
		"metadata":   map[string]any{"name": seed.EPPName + "-tls", "namespace": seed.Namespace},
		"spec": map[string]any{
			"host": seed.EPPName,
			"trafficPolicy": map[string]any{
				"tls": map[string]any{"mode": "SIMPLE", "insecureSkipVerify": true},
			},
		},
	}}
	if _, err := h.dynamic.Resource(kube.DestinationRuleGVR).Namespace(seed.Namespace).Create(ctx, dr, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// bootstrapJSON waits for the Gateway's bootstrap ConfigMap and returns its
// bootstrap, as pilot-discovery wrote it.
func (h *harness) bootstrapJSON() []byte {
	h.t.Helper()
	name := gateway.BootstrapConfigMapName(seed.GatewayName, seed.GatewayClass)
	var boot string
	poll.Until(h.t, waitConfig, "the bootstrap ConfigMap "+name, func() bool {
		cm, err := h.kube.CoreV1().ConfigMaps(seed.GatewayNamespace).Get(h.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		boot = cm.Data[gateway.BootstrapKey]
		return boot != ""
	})
	return []byte(boot)
}

// waitEndpoints waits until the Gateway proxy's cluster has exactly want
// (any order) as its endpoints.
func (h *harness) waitEndpoints(cluster string, want []string) {
	h.t.Helper()
	want = slices.Sorted(slices.Values(want))
	ctx, cancel := context.WithTimeout(h.t.Context(), waitConfig)
	defer cancel()
	if err := h.gw.WaitEndpoints(ctx, cluster, want); err != nil {
		h.t.Fatalf("endpoints of %s never became %v: %v (last seen %v)", cluster, want, err, h.gw.Endpoints(cluster))
	}
}
