// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/eppproxy"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// Pool B of the weighted scenario: two pods of its own and its own EPP.
const (
	podB1, podB2 = "10.244.0.17", "10.244.0.18"
	eppBIP       = "10.244.0.19"
	poolB        = "pool-b"
	eppB         = "pool-b-epp"
)

// Two pools as weighted backends of one rule, each with its own EPP (Istio
// bug 2: they shared the last pool's EPP).
//
// EPPs: two lightweight EPPs (GIE v1.6.2, plaintext), one per pool, each
// behind its own recording proxy: the harness's for the seed's pool (pods
// 13-15, weight 1) and a second for pool-b (pods 17-18, app=pool-b, EPP
// Service pool-b-epp at 10.244.0.19, weight 3). The pools share no pod, so
// the pod that answered says which pool the rule chose. Request shape: GET
// /health, bodiless (what is under test is the split, not the body).
//
// Proves: the seed's route, changed to weights 1:3, splits 400 requests
// within the stated bounds, and every request's pick came from its own
// pool's EPP: a request answered by a pool-b pod has a record with a pick in
// pool-b's proxy and none in the seed pool's, and landed on that pick; the
// reverse for the seed's pool.
//
// Bounds: with weight 3 of 4 the count of pool-b answers among n = 400 is
// Binomial(400, 0.75): mean 300, standard deviation 8.66. The test accepts
// 265..335 (4 standard deviations each side): a correct split fails it with
// probability about 6e-5; a 1:1 split (mean 200) or a 1:0 one never passes.
func TestWeightedPoolsOwnEPPs(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP, SpareIPs: []string{podB1, podB2, eppBIP}})
	h.waitPicking(get())

	// Pool B: its pods, EPP Service and pod, the EPP behind its own proxy.
	h.createLabelledPod(podB1, poolB)
	h.createLabelledPod(podB2, poolB)
	h.createEPPService(eppB)
	h.createEPPPod(eppB, eppBIP)
	h.createPool(newPool(poolB, poolB, eppB, inferencev1.EndpointPickerFailClose))
	eB := epp.Start(t, epp.Config{Kind: epp.LWEPP, Kubeconfig: h.env.Kubeconfig, PoolNamespace: seed.Namespace, PoolName: poolB})
	proxyB, err := eppproxy.Start(context.Background(), eppproxy.Config{Upstream: eB.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxyB.Close)
	h.netns.Relay(t, net.JoinHostPort(eppBIP, strconv.Itoa(seed.EPPPort)), proxyB.Addr())

	// The seed's rule now splits 1:3 between the two pools.
	routes := h.gateways.GatewayV1().HTTPRoutes(seed.Namespace)
	r, err := routes.Get(t.Context(), seed.RouteName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Spec.Rules[0].BackendRefs = append(r.Spec.Rules[0].BackendRefs[:0], poolRef(seed.PoolName, 1), poolRef(poolB, 3))
	if _, err := routes.Update(t.Context(), r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitEndpoints(shadowClusterOf(poolB), []string{ep(podB1), ep(podB2)})
	h.waitEndpoints(eppClusterOf(eppB), []string{net.JoinHostPort(eppBIP, strconv.Itoa(seed.EPPPort))})
	// Only the split is waited for: which EPP each share calls is for the
	// traffic below (the recording proxies) to show.
	h.waitRouteConfig("the weighted rule", routesTo(`"weightedClusters"`, shadowClusterOf(seed.PoolName), shadowClusterOf(poolB)))

	// Pool B's EPP picks once its pod informer has the pods.
	deadline := time.Now().Add(waitEPP)
	for {
		res := h.send(t.Context(), get())
		if rec, ok := proxyB.Record(res.ID); ok && rec.PickedMetadata != "" && res.Status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool-b's EPP made no pick within %v: last %v\n%s", waitEPP, res, tail(eB.Logs(), 3000))
		}
	}

	const n = 400
	b := 0
	for range n {
		res := h.mustSend(get())
		own, other := h.proxy, proxyB
		if res.Pod == podName(podB1) || res.Pod == podName(podB2) {
			own, other = proxyB, h.proxy
			b++
		} else if !seedPod(res.Pod) {
			t.Fatalf("%v: answered by no pod of either pool", res)
		}
		landedOnProxyPick(t, own, res)
		if rec, ok := other.Record(res.ID); ok {
			t.Fatalf("%v: the other pool's EPP saw the request too: %+v", res, rec)
		}
	}
	t.Logf("weights 1:3 over %d requests: seed pool %d, pool-b %d (accepted 265..335)", n, n-b, b)
	if b < 265 || b > 335 {
		t.Fatalf("pool-b served %d of %d requests; with weights 1:3 the accepted range is 265..335", b, n)
	}
}

// landedOnProxyPick asserts res is a 200 from the pod and port that p
// recorded as the EPP's pick (header and metadata agreeing).
func landedOnProxyPick(t *testing.T, p *eppproxy.Proxy, res result) {
	t.Helper()
	rec, ok := p.Record(res.ID)
	if !ok || rec.PickedMetadata == "" {
		t.Fatalf("%v: no pick recorded by its own pool's EPP proxy (%+v)", res, rec)
	}
	if res.Status != http.StatusOK || rec.PickedHeader != rec.PickedMetadata {
		t.Fatalf("%v: want a 200 and the EPP's header and metadata picks to agree (%+v)", res, rec)
	}
	ip, port, err := net.SplitHostPort(rec.PickedMetadata)
	if err != nil || res.Pod != podName(ip) || res.Port != port {
		t.Fatalf("%v: served by %s:%s, but its pool's EPP picked %s", res, res.Pod, res.Port, rec.PickedMetadata)
	}
}
