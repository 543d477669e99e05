// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"net/http"
	"testing"

	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// The EPP goes down and comes back, under a FailOpen and a FailClose pool.
//
// EPP: the lightweight EPP (GIE v1.6.2, plaintext), picking for the seed's
// pool. Two pools over the same three pods and the same EPP Service: the
// seed's (FailOpen, the seed's route) and "failclose" (FailClose, a route
// matching x-gie-pool: failclose). The EPP Service's stream goes through the
// recording proxy, which stays up: what goes down is the EPP behind it, so
// the data plane's stream opens and then fails with Unavailable.
//
// Request shape: GET /health, bodiless both ways. That is the shape that
// proves FailOpen: Envoy honours failure_mode_allow only until a
// FULL_DUPLEX_STREAMED body has reached the processor (architecture/xds.md,
// Known limits), so only a request without a body can fail open once the
// stream has started. The seed's POST /v1/completions is sent too, with the
// EPP down, for the Envoy-faithful outcome on the FailOpen pool: its body is
// streamed to the processor before the stream's failure arrives, so it gets
// Envoy's status_on_error, 500, from no model server, and no failure is
// allowed.
//
// Proves: with the EPP up, both pools' requests land on their recorded
// picks; with the EPP down, the FailOpen pool still serves every GET
// through the override_host fallback (failure_mode_allow continuations and
// fallbacks counted, no pick recorded), its POSTs get 500, and the
// FailClose pool answers every GET with 500 from no model server; with the
// EPP back, both pools' picks are honoured again.
func TestEPPDownFailOpenFailClose(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP})
	const fc = "failclose"
	h.createPool(newPool(fc, seed.PoolName, seed.EPPName, inferencev1.EndpointPickerFailClose))
	h.createRoute(headerRoute(fc, fc, poolRef(fc, 0)))
	h.waitEndpoints(shadowClusterOf(fc), []string{ep(pod13), ep(pod14), ep(pod15)})
	h.waitRouteConfig("the FailClose route", routesTo(`"exact":"failclose"`, shadowClusterOf(fc), `"failureModeAllow":false`))
	h.waitPicking(get())

	// EPP up: both pools' requests land on their picks.
	upPhase := func(what string) {
		t.Helper()
		for i := range 10 {
			h.landedOnPick(h.mustSend(get()))
			res := h.mustSend(onPool(get(), fc))
			h.landedOnPick(res)
			if rec, _ := h.proxy.Record(res.ID); rec.RequestHeaders[poolHeader] == nil {
				t.Fatalf("%s %d: %v: the stream carried no %s header, so it did not come from the FailClose route", what, i, res, poolHeader)
			}
		}
	}
	upPhase("EPP up")

	// EPP down.
	h.epp.Stop()
	dp := h.dataPlane()
	var allowed0, fallbacks0 int64
	if dp != nil {
		allowed0, fallbacks0 = dp.ExtProcCounters().FailureModeAllowed.Load(), dp.Counters().OverrideHostFallbacks
	}
	served := map[string]int{}
	const n = 20
	for range n {
		res := h.mustSend(get())
		if res.Status != http.StatusOK || res.Pod == "" {
			t.Fatalf("%v: the FailOpen pool must serve a bodiless request through the fallback while its EPP is down", res)
		}
		if rec, ok := h.proxy.Record(res.ID); !ok || rec.PickedMetadata != "" {
			t.Fatalf("%v: record %+v, ok %v: want a stream that failed without a pick", res, rec, ok)
		}
		served[res.Pod]++
	}
	t.Logf("FailOpen GETs with the EPP down, by pod: %v", served)
	if len(served) < 2 {
		t.Fatalf("served %v: the fallback (round robin) should spread %d requests over the pool", served, n)
	}
	if dp != nil {
		if got := dp.ExtProcCounters().FailureModeAllowed.Load() - allowed0; got != n {
			t.Fatalf("%d failure_mode_allow continuations for %d FailOpen GETs, want one each", got, n)
		}
		if got := dp.Counters().OverrideHostFallbacks - fallbacks0; got != n {
			t.Fatalf("%d override_host fallbacks for %d FailOpen GETs, want one each", got, n)
		}
	}

	// The POST with a body on the FailOpen pool: Envoy's body rule.
	// Envoy's local reply for an ext_proc error has an empty body; the
	// details (ext_proc_error_gRPC_error_14{...}) go to its access log.
	before := servedTotal(h)
	var local0 int64
	if dp != nil {
		allowed0, local0 = dp.ExtProcCounters().FailureModeAllowed.Load(), dp.ExtProcCounters().LocalReplies.Load()
	}
	const posts = 5
	for range posts {
		res := h.mustSend(completion(seedPrompt))
		if res.Status != http.StatusInternalServerError || res.Pod != "" {
			t.Fatalf("%v: a POST whose body reached the failed EPP stream must get Envoy's 500 from no model server, FailOpen or not", res)
		}
	}
	if got := servedTotal(h) - before; got != 0 {
		t.Fatalf("model servers answered %d of the POSTs", got)
	}
	if dp != nil {
		c := dp.ExtProcCounters()
		if got := c.FailureModeAllowed.Load() - allowed0; got != 0 {
			t.Fatalf("%d failure_mode_allow continuations for POSTs with bodies, want 0", got)
		}
		if got := c.LocalReplies.Load() - local0; got != posts {
			t.Fatalf("%d ext_proc error local replies for %d POSTs, want one each", got, posts)
		}
	}

	// The FailClose pool fails.
	before = servedTotal(h)
	for range 10 {
		res := h.mustSend(onPool(get(), fc))
		if res.Status != http.StatusInternalServerError || res.Pod != "" {
			t.Fatalf("%v: the FailClose pool must fail with Envoy's status_on_error 500 while its EPP is down", res)
		}
	}
	if got := servedTotal(h) - before; got != 0 {
		t.Fatalf("model servers answered %d requests of the FailClose pool with its EPP down", got)
	}

	// EPP back: picks honoured again on both pools.
	h.epp.Restart(t)
	h.waitPicking(get())
	upPhase("EPP back")
}

// servedTotal is how many requests all simulators have answered.
func servedTotal(h *harness) int {
	total := 0
	for _, s := range h.sims {
		total += s.Served()
	}
	return total
}

// A FailOpen pool whose EPP Service has no endpoints at all.
//
// EPP: none for this pool: its endpointPickerRef names a Service whose
// selector matches no pod, so the EPP cluster has no endpoint from the
// start (the harness's lightweight EPP serves only the seed's pool, the
// control). Request shapes: GET /health and the seed's POST
// /v1/completions: with no EPP endpoint the stream fails before anything is
// sent (Envoy: "no healthy upstream" on stream open), so failure_mode_allow
// still applies to a request with a body; both shapes must be served.
//
// Proves: the EPP cluster is pushed and has no endpoints; every request of
// both shapes on the FailOpen pool is a 200 from a pool pod through the
// fallback (no 500, the other gateways' bug), no EPP stream reaches any
// processor (the recording proxy sees none); the seed's pool next to it
// still lands on its picks.
func TestEPPServiceWithoutEndpoints(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP})
	const pool, svc = "noepp", "noepp-epp"
	h.createEPPService(svc) // selects app=noepp-epp: no such pod
	h.createPool(newPool(pool, seed.PoolName, svc, inferencev1.EndpointPickerFailOpen))
	h.createRoute(headerRoute(pool, pool, poolRef(pool, 0)))
	h.waitEndpoints(shadowClusterOf(pool), []string{ep(pod13), ep(pod14), ep(pod15)})
	h.waitRouteConfig("the no-endpoint pool's route", routesTo(`"exact":"noepp"`, shadowClusterOf(pool), eppClusterOf(svc)))
	h.waitEndpoints(eppClusterOf(svc), nil)
	if dp := h.dataPlane(); dp != nil {
		// The EPP cluster itself is pushed (with no endpoints), not missing.
		poll.Until(t, waitConfig, "the EPP cluster "+eppClusterOf(svc), func() bool {
			_, ok := dp.Snapshot().Clusters[eppClusterOf(svc)]
			return ok
		})
	}
	h.waitPicking(get())

	dp := h.dataPlane()
	var allowed0, fallbacks0 int64
	if dp != nil {
		allowed0, fallbacks0 = dp.ExtProcCounters().FailureModeAllowed.Load(), dp.Counters().OverrideHostFallbacks
	}
	streams := len(h.proxy.Records())
	served := map[string]int{}
	const n = 10
	for i := range n {
		for _, r := range []request{get(), completion(seedPrompt)} {
			res := h.mustSend(onPool(r, pool))
			if res.Status != http.StatusOK || !seedPod(res.Pod) {
				t.Fatalf("%d: %s %s: %v: a FailOpen pool without EPP endpoints must serve through the fallback", i, r.Method, r.Path, res)
			}
			served[res.Pod]++
		}
	}
	t.Logf("served without EPP endpoints, by pod: %v", served)
	if got := len(h.proxy.Records()) - streams; got != 0 {
		t.Fatalf("%d EPP streams reached the recording proxy; the pool's EPP Service has no endpoints", got)
	}
	if dp != nil {
		if got := dp.ExtProcCounters().FailureModeAllowed.Load() - allowed0; got != 2*n {
			t.Fatalf("%d failure_mode_allow continuations, want %d (one per request)", got, 2*n)
		}
		if got := dp.Counters().OverrideHostFallbacks - fallbacks0; got != 2*n {
			t.Fatalf("%d override_host fallbacks, want %d", got, 2*n)
		}
	}
	for range 5 {
		h.landedOnPick(h.mustSend(get()))
	}
}
