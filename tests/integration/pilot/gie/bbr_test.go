// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/bbr"
	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/eppproxy"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

// The model-routing scenario's second pool (its own pods and EPP) and the
// body-based router's pod, Service and port.
const (
	qwenPod1, qwenPod2 = "10.244.0.20", "10.244.0.21"
	qwenEPPIP          = "10.244.0.22"
	bbrIP              = "10.244.0.23"
	qwenPool           = "qwen-pool"
	qwenEPP            = "qwen-pool-epp"
	bbrName            = "bbr"
	bbrPort            = 9004
	// modelA is served by the seed's pool (its LoRA adapter), modelB by
	// qwen-pool's pods (their base model); unknownModel by neither.
	modelA       = loraModel
	modelB       = "Qwen/Qwen2.5-1.5B-Instruct"
	unknownModel = "no-such-model"
)

// bbrCluster is the data plane cluster of the router's Service port.
var bbrCluster = fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", bbrPort, bbrName, seed.GatewayNamespace)

// Route by model name: GIE's body-based router (cmd/bbr v1.0.0, real,
// --streaming; pkg/test/bbr) as the seed Gateway's listener filter, and two
// InferencePools behind one hostname, each with its own real EPP (the full
// EPP v1.0.0, behind its own recording proxy).
//
// World: the harness (experimental Gateway API CRDs and the chart's
// ExternalProcessor CRD); pool vllm-llama3-8b (pods 13-15, serving
// reviews-1) and qwen-pool (pods 20-21, app=qwen-pool, serving
// Qwen/Qwen2.5-1.5B-Instruct, EPP Service qwen-pool-epp at 10.244.0.22);
// the router behind the Service bbr:9004 of the Gateway's namespace (pod at
// 10.244.0.23, relayed to the process on loopback; it serves TLS only, so
// a DestinationRule SIMPLE insecureSkipVerify, as GIE's chart sets for
// Istio); the ExternalProcessor bbr (requestBody FullDuplexStreamed,
// failureMode FailClose) named by the listener's filters.requests. The
// seed's route is replaced by two: X-Gateway-Model-Name reviews-1 to the
// seed's pool, X-Gateway-Model-Name Qwen/... to qwen-pool; nothing else
// matches the host, so a request without the header gets 404.
//
// Proves: for each model, 20 completions land on a pod of the pool serving
// it, each the pod that pool's EPP picked (its proxy recorded the pick, the
// other pool's proxy never saw the request), and the model server received
// X-Gateway-Model-Name as the router set it; a client's own
// X-Gateway-Model-Name changes nothing (removed before the router runs: a
// forged header naming the other model lands by the body's model, and the
// model server sees the body's model only; a body-less request with a
// forged header gets the 404 of no header); an unknown model gets 404.
// Router stopped: FailClose answers 5xx and nothing reaches an EPP or a
// model server; changed to FailOpen, body-less requests go on without the
// header, so they get the routes' answer without it (404), a forged header
// included, while a completion, whose body was already streamed to the
// router, gets Envoy's 500; router restarted, routing by model again.
func TestModelRoutingBodyBasedRouter(t *testing.T) {
	h := newHarness(t, options{
		EPP: epp.FullEPP, ExperimentalCRDs: true, ExternalProcessorCRD: true,
		SpareIPs: []string{qwenPod1, qwenPod2}, OtherIPs: []string{qwenEPPIP, bbrIP},
		Sim: func(c *vllmsim.Config) {
			if c.PodName == podName(qwenPod1) || c.PodName == podName(qwenPod2) {
				c.Model, c.LoRAs = modelB, nil
			}
		},
	})
	ctx := t.Context()

	// qwen-pool: its pods, EPP Service and pod, the EPP behind its own proxy.
	h.createLabelledPod(qwenPod1, qwenPool)
	h.createLabelledPod(qwenPod2, qwenPool)
	h.createEPPService(qwenEPP)
	h.createEPPPod(qwenEPP, qwenEPPIP)
	h.createPool(newPool(qwenPool, qwenPool, qwenEPP, inferencev1.EndpointPickerFailClose))
	eB := epp.Start(t, epp.Config{Kind: epp.FullEPP, Kubeconfig: h.env.Kubeconfig, PoolNamespace: seed.Namespace, PoolName: qwenPool})
	proxyB, err := eppproxy.Start(ctx, eppproxy.Config{Upstream: eB.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxyB.Close)
	h.netns.Relay(t, net.JoinHostPort(qwenEPPIP, strconv.Itoa(seed.EPPPort)), proxyB.Addr())

	// The router, its objects and the listener filter naming it.
	router := bbr.Start(t, bbr.Config{Kubeconfig: h.env.Kubeconfig})
	h.netns.Relay(t, net.JoinHostPort(bbrIP, strconv.Itoa(bbrPort)), router.Addr())
	h.createRouterObjects()
	processors := h.dynamic.Resource(imv1alpha1.ExternalProcessorsGVR).Namespace(seed.GatewayNamespace)
	if _, err := processors.Create(ctx, routerProcessor(imv1alpha1.FailClose), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gws := h.gateways.GatewayV1().Gateways(seed.GatewayNamespace)
	g, err := gws.Get(ctx, seed.GatewayName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g.Spec.Listeners[0].Filters = &gwv1.ListenerFilters{Requests: []gwv1.ListenerFilter{{
		Type: gwv1.ListenerFilterExtensionRef,
		ExtensionRef: &gwv1.LocalObjectReference{Group: imv1alpha1.GroupName, Kind: imv1alpha1.ExternalProcessorKind,
			Name: bbrName}}}}
	if _, err := gws.Update(ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The seed's route gives way to one route per model.
	if err := h.gateways.GatewayV1().HTTPRoutes(seed.Namespace).Delete(ctx, seed.RouteName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.createRoute(modelRoute("model-a", modelA, seed.PoolName))
	h.createRoute(modelRoute("model-b", modelB, qwenPool))

	h.waitEndpoints(shadowClusterOf(qwenPool), []string{ep(qwenPod1), ep(qwenPod2)})
	h.waitEndpoints(eppClusterOf(qwenEPP), []string{net.JoinHostPort(qwenEPPIP, strconv.Itoa(seed.EPPPort))})
	h.waitEndpoints(bbrCluster, []string{net.JoinHostPort(bbrIP, strconv.Itoa(bbrPort))})
	h.waitRouteConfig("both model routes and the listener filter enabled", func(js string) bool {
		return containsAll(js, `"exact":"`+modelA+`"`, `"exact":"`+modelB+`"`,
			core.ListenerFilterName("http", 0), core.ListenerFilterFallbackRoute)
	})
	pools := []struct {
		model string
		proxy *eppproxy.Proxy
		other *eppproxy.Proxy
		owns  func(pod string) bool
	}{
		{modelA, h.proxy, proxyB, seedPod},
		{modelB, proxyB, h.proxy, func(pod string) bool { return pod == podName(qwenPod1) || pod == podName(qwenPod2) }},
	}
	for _, p := range pools {
		h.waitModelPicked(p.model, p.proxy)
	}

	// (1) Each model reaches its own pool, on its EPP's pick, with the
	// router's header.
	for _, p := range pools {
		for range 20 {
			res := h.mustSend(modelCompletion(p.model))
			h.checkModelLanded(res, p.model, p.proxy, p.other, p.owns)
		}
	}

	// (2) A forged X-Gateway-Model-Name changes nothing.
	for i, p := range pools {
		forged := pools[1-i].model
		for range 5 {
			res := h.mustSend(modelCompletion(p.model).with(core.ModelNameHeader, forged))
			h.checkModelLanded(res, p.model, p.proxy, p.other, p.owns)
		}
	}
	quiet := h.modelQuiet(proxyB)
	var ids []string
	for _, r := range []request{getModels().with(core.ModelNameHeader, modelA), modelCompletion(unknownModel),
		modelCompletion(unknownModel).with(core.ModelNameHeader, modelB)} {
		res := h.mustSend(r)
		if res.Status != http.StatusNotFound || res.Pod != "" {
			t.Fatalf("%v: a request whose body names no served model (forged header or not): want 404 from no model server", res)
		}
		ids = append(ids, res.ID)
	}
	quiet.check(t, h, proxyB, "routed by no model", ids)

	// (3) Router stopped, FailClose: 5xx, nothing behind the filter.
	router.Stop()
	quiet = h.modelQuiet(proxyB)
	ids = ids[:0]
	for _, p := range pools {
		for range 3 {
			res := h.mustSend(modelCompletion(p.model))
			if res.Status < 500 || res.Pod != "" {
				t.Fatalf("%v: router down, failureMode FailClose: want a 5xx from no model server", res)
			}
			ids = append(ids, res.ID)
		}
	}
	quiet.check(t, h, proxyB, "sent while the router was down (FailClose)", ids)

	// (4) FailOpen: a request the router fails on goes on without the
	// router's header, so it gets what the routes give without it: here no
	// route matches, 404. That holds for requests without a body; a
	// completion's body has already been streamed towards the router when
	// its stream fails, and Envoy no longer honours failure_mode_allow in
	// FULL_DUPLEX_STREAMED mode once a body went to the processor
	// (architecture/xds.md, "FailOpen and request bodies"): it is answered
	// 500 as under FailClose.
	u, err := processors.Get(ctx, bbrName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, string(imv1alpha1.FailOpen), "spec", "failureMode"); err != nil {
		t.Fatal(err)
	}
	if _, err := processors.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last result
	poll.UntilOr(t, waitConfig, "failureMode FailOpen in effect (a body-less request no longer answered 5xx)", func() bool {
		last = h.mustSend(getModels())
		return last.Status < 500
	}, func() string { return last.String() })
	quiet = h.modelQuiet(proxyB)
	ids = ids[:0]
	for _, p := range pools {
		for _, r := range []request{getModels(), getModels().with(core.ModelNameHeader, p.model)} {
			res := h.mustSend(r)
			if res.Status != http.StatusNotFound || res.Pod != "" {
				t.Fatalf("%v: router down, failureMode FailOpen, no body: want the 404 of a request without %s (no route matches without it)", res, core.ModelNameHeader)
			}
			ids = append(ids, res.ID)
		}
		res := h.mustSend(modelCompletion(p.model))
		if res.Status != http.StatusInternalServerError || res.Pod != "" {
			t.Fatalf("%v: router down, failureMode FailOpen, a streamed body: want Envoy's 500", res)
		}
		ids = append(ids, res.ID)
	}
	quiet.check(t, h, proxyB, "sent while the router was down (FailOpen)", ids)

	// (5) Router back: routing by model again. The data plane's gRPC
	// channel reconnects with back-off: a bounded wait, then every request
	// must land.
	router.Restart(t)
	for _, p := range pools {
		poll.UntilOr(t, waitConfig, "model "+p.model+" routed after the router's restart", func() bool {
			last = h.mustSend(modelCompletion(p.model))
			return last.Status == http.StatusOK
		}, func() string { return last.String() })
		for range 3 {
			h.checkModelLanded(h.mustSend(modelCompletion(p.model)), p.model, p.proxy, p.other, p.owns)
		}
	}
}

// modelCompletion is the seed's completion naming model.
func modelCompletion(model string) request {
	r := completion(seedPrompt)
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": seedPrompt, "max_tokens": 100, "temperature": 0})
	r.Body = body
	return r
}

// modelRoute is the seed's route renamed, matching X-Gateway-Model-Name
// model, to pool.
func modelRoute(name, model, pool string) *gwv1.HTTPRoute {
	r := seed.HTTPRoute()
	r.Name = name
	r.Spec.Rules[0].Matches[0].Headers = []gwv1.HTTPHeaderMatch{{Name: gwv1.HTTPHeaderName(core.ModelNameHeader), Value: model}}
	r.Spec.Rules[0].BackendRefs = []gwv1.HTTPBackendRef{poolRef(pool, 0)}
	return r
}

// routerProcessor is the ExternalProcessor bbr: the router's Service port,
// request headers sent, request body streamed (FULL_DUPLEX_STREAMED,
// BBR's --streaming), failure mode mode.
func routerProcessor(mode imv1alpha1.FailureMode) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": imv1alpha1.SchemeGroupVersion.String(), "kind": imv1alpha1.ExternalProcessorKind,
		"metadata": map[string]any{"namespace": seed.GatewayNamespace, "name": bbrName},
		"spec": map[string]any{
			"backendRef":     map[string]any{"name": bbrName, "port": int64(bbrPort)},
			"processingMode": map[string]any{"requestHeaders": "Send", "requestBody": "FullDuplexStreamed"},
			"failureMode":    string(mode),
		},
	}}
}

// createRouterObjects creates, in the Gateway's namespace, the router's
// ready pod at bbrIP, its Service bbr:9004 and the DestinationRule giving
// the Service client TLS (SIMPLE, insecureSkipVerify: BBR's certificate is
// self-signed at each start).
func (h *harness) createRouterObjects() {
	h.t.Helper()
	ctx := h.t.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.GatewayNamespace, Name: bbrName + "-0", Labels: map[string]string{"app": bbrName}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "bbr", Image: "example.invalid/bbr:never-pulled",
			Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: bbrPort}},
		}}},
	}
	h.createReadyPod(pod, bbrIP, true)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.GatewayNamespace, Name: bbrName},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": bbrName},
			Ports: []corev1.ServicePort{{Name: "grpc", Protocol: corev1.ProtocolTCP, Port: bbrPort,
				TargetPort: intstr.FromInt32(bbrPort), AppProtocol: ptr.To("http2")}},
		},
	}
	if _, err := h.kube.CoreV1().Services(seed.GatewayNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	dr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1",
		"kind":       "DestinationRule",
		"metadata":   map[string]any{"name": bbrName + "-tls", "namespace": seed.GatewayNamespace},
		"spec": map[string]any{
			"host":          bbrName,
			"trafficPolicy": map[string]any{"tls": map[string]any{"mode": "SIMPLE", "insecureSkipVerify": true}},
		},
	}}
	if _, err := h.dynamic.Resource(kube.DestinationRuleGVR).Namespace(seed.GatewayNamespace).Create(ctx, dr, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// waitModelPicked waits (bounded) until a completion naming model is
// answered 200 with a pick recorded by proxy: the router, the route and the
// pool's EPP (its informers, its first scrapes) are all in place.
func (h *harness) waitModelPicked(model string, proxy *eppproxy.Proxy) {
	h.t.Helper()
	var last result
	poll.UntilOr(h.t, waitEPP, "a completion naming "+model+" picked by its pool's EPP", func() bool {
		last = h.send(h.t.Context(), modelCompletion(model))
		rec, ok := proxy.Record(last.ID)
		return last.Status == http.StatusOK && ok && rec.PickedMetadata != ""
	}, func() string { return last.String() })
}

// checkModelLanded fails the test unless res, a completion naming model,
// was served by a pod owns accepts, the pick own's EPP made for it, never
// seen by other's EPP, and the model server received X-Gateway-Model-Name
// model, once.
func (h *harness) checkModelLanded(res result, model string, own, other *eppproxy.Proxy, owns func(string) bool) {
	h.t.Helper()
	if !owns(res.Pod) {
		h.t.Fatalf("%v: model %s answered by %q, no pod of its pool", res, model, res.Pod)
	}
	landedOnProxyPick(h.t, own, res)
	if rec, ok := other.Record(res.ID); ok {
		h.t.Fatalf("%v: the other pool's EPP saw the request: %+v", res, rec)
	}
	rec, _ := own.Record(res.ID)
	ip, _, _ := net.SplitHostPort(rec.PickedMetadata)
	got, ok := h.sims[ip].LastRequest()
	if !ok || got.Header.Get("x-test-request-id") != res.ID {
		h.t.Fatalf("%v: the model server at %s has no record of it", res, ip)
	}
	if v := got.Header.Values(core.ModelNameHeader); len(v) != 1 || v[0] != model {
		h.t.Fatalf("%v: the model server got %s %q, want the router's %q only", res, core.ModelNameHeader, v, model)
	}
}

// modelQuiet is behindFilter with the second pool's EPP: what lies behind
// the listener filter at one moment.
type modelQuietState struct {
	quietState
	streamsB int
}

func (h *harness) modelQuiet(proxyB *eppproxy.Proxy) modelQuietState {
	return modelQuietState{quietState: h.behindFilter(), streamsB: len(proxyB.Records())}
}

// check fails t unless none of the requests ids reached either pool's EPP
// or any model server since q. Unlike ExternalAuth's denials, nothing here
// runs the EPP's filter at all (no route, or the listener filter's own
// local reply before route selection), so no EPP stream is expected.
func (q modelQuietState) check(t *testing.T, h *harness, proxyB *eppproxy.Proxy, what string, ids []string) {
	t.Helper()
	for _, id := range ids {
		for _, p := range []*eppproxy.Proxy{h.proxy, proxyB} {
			if rec, ok := p.Record(id); ok {
				t.Fatalf("request %s (%s) reached an EPP: %+v", id, what, rec)
			}
		}
	}
	var extra []string
	for _, rec := range h.proxy.Records()[q.streams:] {
		extra = append(extra, fmt.Sprintf("%+v", rec))
	}
	for _, rec := range proxyB.Records()[q.streamsB:] {
		extra = append(extra, fmt.Sprintf("%+v", rec))
	}
	if len(extra) > 0 {
		t.Fatalf("EPP streams while only requests %s were sent:\n%s", what, strings.Join(extra, "\n"))
	}
	if now := servedTotal(h); now != q.served {
		t.Fatalf("model servers served %d requests while only requests %s were sent", now-q.served, what)
	}
}
