// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// Pods that become ready after the pool exists, and pods that go away.
//
// EPP: the full EPP (GIE v1.0.0, plaintext): it watches pods itself (as our
// registry does) and scrapes each new one before picking it. Request shape:
// the seed's POST /v1/completions with a prompt of its own each time, so
// idle pods tie and every ready pod gets picks.
//
// Proves, in this order: a pod that exists with an IP but is not ready (its
// simulator already answering) is no endpoint: once its EndpointSlice entry
// (ready false) is in the API, deleting another pod leaves exactly one
// endpoint in the proxy's EDS, and no request reaches the deleted pod or the
// unready one, even those the EPP (whose own pod watch may trail) still picks:
// they go to the remaining endpoint through the override_host fallback. Then
// the unready pod made ready, with no other change, joins EDS (waited for on
// the proxy's endpoints, not a sleep) and receives traffic.
func TestPodsBecomeReady(t *testing.T) {
	h := newHarness(t, options{EPP: epp.FullEPP, ReadyPods: []string{pod13, pod14}, SpareIPs: []string{pod17}})
	h.waitPicking(completion(seedPrompt))
	ep13, ep17 := net.JoinHostPort(pod13, "8000"), net.JoinHostPort(pod17, "8000")

	// Pod 17: an IP, a running simulator, not ready.
	h.createPod(pod17, false)
	h.waitSliceEndpoint(pod17, false)

	// Pod 14 goes away. The slice that drops it is a later version of the
	// one that lists pod 17 unready, so EDS {13} proves both.
	h.deletePod(pod14)
	h.waitEndpoints(shadowCluster, []string{ep13})
	got14, got17 := h.sims[pod14].Stats().Received, h.sims[pod17].Stats().Received
	stale := 0
	for i := range 30 {
		res := h.mustSend(completion(fmt.Sprintf("gone %d. %s", i, seedPrompt)))
		if res.Status != http.StatusOK || res.Pod != podName(pod13) {
			t.Fatalf("%v: want 200 from %s, the only endpoint", res, podName(pod13))
		}
		if pick, _ := h.pick(res); pick != ep13 {
			stale++ // the EPP's view trails: the fallback served it
		}
	}
	t.Logf("with only pod 13 in EDS: %d picks of other pods served by the fallback", stale)
	if n := h.sims[pod14].Stats().Received - got14; n != 0 {
		t.Fatalf("the deleted pod received %d requests after it left EDS", n)
	}
	if n := h.sims[pod17].Stats().Received - got17; n != 0 {
		t.Fatalf("the unready pod received %d requests", n)
	}

	// Pod 17 made ready: it joins EDS and receives traffic.
	h.setPodReady(pod17, true)
	h.waitEndpoints(shadowCluster, []string{ep13, ep17})
	deadline := time.Now().Add(waitEPP)
	for n := 0; ; n++ {
		if h.landedOnPick(h.mustSend(completion(fmt.Sprintf("ready %d. %s", n, seedPrompt)))) == ep17 {
			t.Logf("the pod made ready got its first request after %d requests", n+1)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod made ready never got a request within %v (%d requests)", waitEPP, n+1)
		}
	}
}

// waitSliceEndpoint waits until an EndpointSlice of the pool's shadow
// Service lists ip with the given ready condition.
func (h *harness) waitSliceEndpoint(ip string, ready bool) {
	h.t.Helper()
	sel := discoveryv1.LabelServiceName + "=" + gateway.ShadowServiceName(seed.PoolName)
	poll.Until(h.t, waitConfig, fmt.Sprintf("EndpointSlice entry %s ready=%v", ip, ready), func() bool {
		list, err := h.kube.DiscoveryV1().EndpointSlices(seed.Namespace).List(h.t.Context(), metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false
		}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if hasAddr(e.Addresses, ip) && (e.Conditions.Ready == nil || *e.Conditions.Ready) == ready {
					return true
				}
			}
		}
		return false
	})
}

func hasAddr(addrs []string, ip string) bool { return slices.Contains(addrs, ip) }
