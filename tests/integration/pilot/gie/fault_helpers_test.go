// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/test/dataplane"
	"github.com/infermesh/infermesh/pkg/test/gwproxy"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// Helpers of the fault, churn and benchmark scenarios: more pools, EPP
// Services and routes beside the seed's, and waits on the Gateway proxy's
// route configuration.

// poolHeader selects the extra routes these scenarios add: each matches the
// seed's host and path prefix / plus poolHeader: <value>, which Gateway API
// precedence ranks above the seed's header-less rule.
const poolHeader = "x-gie-pool"

// shadowClusterOf is the data plane cluster of pool's shadow Service.
func shadowClusterOf(pool string) string {
	return "outbound|54321||" + gateway.ShadowServiceName(pool) + "." + seed.Namespace + ".svc.cluster.local"
}

// eppClusterOf is the data plane cluster of the EPP Service svc (port 9002).
func eppClusterOf(svc string) string {
	return fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", seed.EPPPort, svc, seed.Namespace)
}

// createEPPService creates an EPP Service like the seed's (port 9002,
// appProtocol http2) named name, selecting pods labelled app=name.
func (h *harness) createEPPService(name string) {
	h.t.Helper()
	svc := seed.EPPService()
	svc.Name = name
	svc.Spec.Selector = map[string]string{"app": name}
	if _, err := h.kube.CoreV1().Services(seed.Namespace).Create(h.t.Context(), svc, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// createEPPPod creates a ready pod labelled app=svc at ip: the endpoint of
// the EPP Service svc.
func (h *harness) createEPPPod(svc, ip string) {
	h.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: svc + "-0", Labels: map[string]string{"app": svc}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "epp", Image: "example.invalid/epp:never-pulled",
			Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: seed.EPPPort}},
		}}},
	}
	h.createReadyPod(pod, ip, true)
}

// createLabelledPod creates a model-server pod at ip (named podName(ip), so
// the simulator's x-inference-pod matches) labelled app=app, target port
// 8000, ready.
func (h *harness) createLabelledPod(ip, app string) {
	h.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: podName(ip), Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "vllm-sim", Image: "example.invalid/llm-d-inference-sim:never-pulled",
			Ports: []corev1.ContainerPort{{Name: "http-0", ContainerPort: 8000}},
		}}},
	}
	h.createReadyPod(pod, ip, true)
}

// newPool is the seed's pool renamed, selecting app=app, with the EPP
// Service eppSvc and failure mode mode.
func newPool(name, app, eppSvc string, mode inferencev1.EndpointPickerFailureMode) *inferencev1.InferencePool {
	p := seed.InferencePool()
	p.Name = name
	p.Spec.Selector.MatchLabels = map[inferencev1.LabelKey]inferencev1.LabelValue{"app": inferencev1.LabelValue(app)}
	p.Spec.EndpointPickerRef.Name = inferencev1.ObjectName(eppSvc)
	p.Spec.EndpointPickerRef.FailureMode = mode
	return p
}

func (h *harness) createPool(p *inferencev1.InferencePool) {
	h.t.Helper()
	if _, err := h.inference.InferenceV1().InferencePools(seed.Namespace).Create(h.t.Context(), p, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// poolRef is an HTTPRoute backendRef to pool; weight 0 leaves it unset.
func poolRef(pool string, weight int32) gwv1.HTTPBackendRef {
	ref := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
		Group: ptr.To(gwv1.Group("inference.networking.k8s.io")),
		Kind:  ptr.To(gwv1.Kind("InferencePool")),
		Name:  gwv1.ObjectName(pool),
	}}}
	if weight > 0 {
		ref.Weight = ptr.To(weight)
	}
	return ref
}

// headerRoute is the seed's route renamed, its one rule matching also
// poolHeader: value, to refs.
func headerRoute(name, value string, refs ...gwv1.HTTPBackendRef) *gwv1.HTTPRoute {
	r := seed.HTTPRoute()
	r.Name = name
	r.Spec.Rules[0].Matches[0].Headers = []gwv1.HTTPHeaderMatch{{Name: poolHeader, Value: value}}
	r.Spec.Rules[0].BackendRefs = refs
	return r
}

func (h *harness) createRoute(r *gwv1.HTTPRoute) {
	h.t.Helper()
	if _, err := h.gateways.GatewayV1().HTTPRoutes(seed.Namespace).Create(h.t.Context(), r, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// waitRouteConfig waits (bounded) until one of the Gateway proxy's route
// configurations, as JSON, satisfies cond: the route a test added or changed
// is in effect on the proxy, not just in the API.
func (h *harness) waitRouteConfig(what string, cond func(js string) bool) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), waitConfig)
	defer cancel()
	if dp := h.dataPlane(); dp != nil {
		var last []string
		if err := dp.WaitFor(ctx, func(s dataplane.Snapshot) bool {
			last = last[:0]
			for _, rc := range s.Routes {
				js := compact(protojson.Format(rc))
				if cond(js) {
					return true
				}
				last = append(last, js)
			}
			return false
		}); err != nil {
			h.t.Fatalf("route configuration never had %s: %v; last seen:\n%s", what, err, strings.Join(last, "\n"))
		}
		return
	}
	admin := h.gw.(*gwproxy.Envoy).Admin()
	for interval := 5 * time.Millisecond; ; interval = min(2*interval, 200*time.Millisecond) {
		if resp, err := http.Get("http://" + admin + "/config_dump?resource=dynamic_route_configs"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if cond(compact(string(b))) {
				return
			}
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("route configuration never had %s", what)
		case <-time.After(interval): // back-off of a bounded poll
		}
	}
}

// compact drops JSON's white space (protojson varies it on purpose); the
// values compared contain none.
func compact(js string) string { return strings.Join(strings.Fields(js), "") }

// routesTo is a waitRouteConfig condition: the configuration names every
// one of subs (a header value, a cluster, a timeout).
func routesTo(subs ...string) func(string) bool {
	return func(js string) bool { return containsAll(js, subs...) }
}

// onPool returns r sent to the extra route matching poolHeader: value.
func onPool(r request, value string) request { return r.with(poolHeader, value) }

// traffic is a set of clients sending requests until stopped, keeping every
// result for the test goroutine to check.
type traffic struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	res    []result
	// tags[i] is the label of the client that got res[i].
	tags []string
}

// startTraffic starts one client per entry of shapes (label -> request),
// each sending its request back to back until stop. Each request is a fresh
// connection (gatewayClient keeps none), so a listener swap is exercised too.
func (h *harness) startTraffic(shapes map[string]request) *traffic {
	ctx, cancel := context.WithCancel(h.t.Context())
	tr := &traffic{cancel: cancel}
	for tag, r := range shapes {
		tr.wg.Go(func() {
			for ctx.Err() == nil {
				if dp := h.dataPlane(); dp != nil && dp.Addr(gwPort) == nil {
					// The Gateway's listener is gone (an empty LDS was
					// accepted): a failure, recorded, not a panic in send.
					tr.mu.Lock()
					tr.res = append(tr.res, result{ID: "-", Err: errors.New("the data plane has no listener on port 80")})
					tr.tags = append(tr.tags, tag)
					tr.mu.Unlock()
					continue
				}
				res := h.send(ctx, r)
				if ctx.Err() != nil && res.Err != nil {
					return // cut short by stop, not a failure
				}
				tr.mu.Lock()
				tr.res, tr.tags = append(tr.res, res), append(tr.tags, tag)
				tr.mu.Unlock()
			}
		})
	}
	h.t.Cleanup(tr.stop)
	return tr
}

// count is how many results the clients have so far.
func (tr *traffic) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.res)
}

// waitCount waits (bounded) until the clients have at least n more results
// than they had at from: traffic really flowed across a phase.
func (tr *traffic) waitCount(t *testing.T, from, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(waitConfig)
	for tr.count() < from+n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: only %d requests completed in %v, want %d", what, tr.count()-from, waitConfig, n)
		}
		time.Sleep(5 * time.Millisecond) // back-off of a bounded poll on a real counter
	}
}

// stop stops the clients and waits for them; the results are then final.
func (tr *traffic) stop() {
	tr.cancel()
	tr.wg.Wait()
}

// failures are the results that are not a complete 200 from a model server.
func (tr *traffic) failures() []result {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []result
	for _, r := range tr.res {
		if r.Err != nil || r.Status != http.StatusOK || r.Pod == "" {
			out = append(out, r)
		}
	}
	return out
}

// summary is a short account of the results, for logs and failures.
func (tr *traffic) summary() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	by := map[string]map[int]int{}
	for i, r := range tr.res {
		if by[tr.tags[i]] == nil {
			by[tr.tags[i]] = map[int]int{}
		}
		by[tr.tags[i]][r.Status]++
	}
	var b strings.Builder
	for tag, codes := range by {
		fmt.Fprintf(&b, "%s: %v; ", tag, codes)
	}
	return fmt.Sprintf("%d requests by client and status: %s", len(tr.res), b.String())
}

// checkLandedOnPicks asserts that every result landed on its recorded pick.
func (h *harness) checkLandedOnPicks(tr *traffic) {
	h.t.Helper()
	tr.mu.Lock()
	res := append([]result(nil), tr.res...)
	tr.mu.Unlock()
	for _, r := range res {
		h.landedOnPick(r)
	}
}

// ep is ip:8000.
func ep(ip string) string { return net.JoinHostPort(ip, strconv.Itoa(8000)) }

// seedPod reports whether name is one of the seed pool's three pods.
func seedPod(name string) bool {
	return name == podName(pod13) || name == podName(pod14) || name == podName(pod15)
}
