// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/epp"
)

// lwepp v1.6.0 and its body bug.
//
// EPP: the lightweight EPP (GIE v1.6.0, plaintext), the one with the bug.
// Request shapes: GET /health (no body either way), which must work; GET
// /v1/models (a response body) and the seed's POST /v1/completions (a
// request body), which lwepp breaks.
//
// What lwepp does with a body (pkg/lwepp/handlers/server.go at v1.6.0): it
// answers every body message, request or response, with an empty
// CommonResponse, without body_mutation.streamed_response. With request
// headers that do not end the stream it defers its pick until the request
// body's end_of_stream, then sends the request-headers response (header
// mutation and envoy.lb metadata naming the pick), then that empty body
// answer. Under FULL_DUPLEX_STREAMED (both body modes of our routes, as of
// Istio's) Envoy requires streamed_response in every body answer: the empty
// one is a spurious message ("spurious message: Normal body mutation
// response is received while body_mode_ is FULL_DUPLEX_STREAMED",
// spurious_msgs_received), and Envoy ends the request with an immediate
// response of status_on_error, 500. failure_mode_allow (the pool is
// FailOpen) does not save it: Envoy stops failing open once a
// FULL_DUPLEX_STREAMED body has reached the processor. That is the upstream
// report (kubernetes-sigs/gateway-api-inference-extension#3035, fixed by
// kubernetes-sigs/gateway-api-inference-extension#3028 after v1.6.0: "Returning an empty
// CommonResponse causes Gateways to terminate the ext-proc stream and return
// HTTP 500", in both body directions). A GET whose response has no body
// never reaches a body message, so it works.
//
// Asserted through the data plane: GET /health lands on its recorded pick;
// GET /v1/models is picked and forwarded, but the response body's spurious
// answer ends it: the client gets no complete response (on the test data
// plane: no response at all, the connection closes; Envoy has sent the
// response headers by then and resets the stream instead, which the client
// sees as a truncated response); each POST gets a 500 with no model server
// answering, although lwepp did pick. On the test data plane also: one
// spurious message and one error local reply per broken request, and no
// failure_mode_allow continuation.
func TestLWEPPBodyBug(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP})
	h.waitPicking(get())

	// GET without bodies works: every request lands on its recorded pick.
	seen := map[string]int{}
	for range 30 {
		seen[h.landedOnPick(h.mustSend(get()))]++
	}
	t.Logf("GET /health picks: %v", seen)

	dp := h.dataPlane()
	type counts struct{ spurious, local, allowed int64 }
	read := func() counts {
		if dp == nil {
			return counts{}
		}
		c := dp.ExtProcCounters()
		return counts{c.SpuriousMessages.Load(), c.LocalReplies.Load(), c.FailureModeAllowed.Load()}
	}
	expect := func(what string, before counts, n int64) {
		t.Helper()
		if dp == nil {
			return // real Envoy: its stats are not read here
		}
		d := read()
		if got := d.spurious - before.spurious; got != n {
			t.Errorf("%s: %d spurious ext_proc messages, want %d (one per request)", what, got, n)
		}
		if got := d.local - before.local; got != n {
			t.Errorf("%s: %d ext_proc error local replies, want %d", what, got, n)
		}
		if got := d.allowed - before.allowed; got != 0 {
			t.Errorf("%s: %d failure_mode_allow continuations, want 0 (no fail-open once a body reached the EPP)", what, got)
		}
	}
	const n = 5

	// A response body: picked and forwarded, then cut off.
	before := read()
	for range n {
		res := h.send(t.Context(), getModels())
		pick, rec := h.pick(res)
		if pick == "" || res.Err == nil {
			t.Fatalf("%v (record %+v): want lwepp's pick, then no complete response", res, rec)
		}
		if dp != nil && res.Status != 0 {
			t.Fatalf("%v: the test data plane sent a response; want the connection closed without one", res)
		}
	}
	expect("GET /v1/models", before, n)

	// A request body: 500, no model server answers.
	served := func() int {
		total := 0
		for _, s := range h.sims {
			total += s.Served()
		}
		return total
	}
	before, received := read(), served()
	for range n {
		res := h.mustSend(completion(seedPrompt))
		pick, rec := h.pick(res)
		if res.Status != http.StatusInternalServerError || res.Pod != "" {
			t.Fatalf("%v (record %+v): want the 500 Envoy answers, from no model server", res, rec)
		}
		if pick == "" {
			t.Fatalf("%v: lwepp made no pick (record %+v); the bug is in its body answer, after the pick", res, rec)
		}
	}
	if got := served(); got != received {
		t.Errorf("model servers answered %d of the POSTs, want 0", got-received)
	}
	expect("POST /v1/completions", before, n)
}

// Multiple target ports.
//
// EPP: lwepp (GIE v1.6.0; the full EPP v1.0.0 supports one target port
// only). Request shape: GET /health, bodiless both ways, the only shape
// lwepp v1.6.0 handles (see TestLWEPPBodyBug).
// lwepp lists one endpoint per pod and target port, and, as in the
// conformance suite, narrows its candidates to the ip:port list in the
// request header test-epp-endpoint-selection (pkg/lwepp/handlers/request.go
// at v1.6.0), so the test steers each pick.
//
// Proves: the pool's shadow cluster has all nine pod:port endpoints; a pick
// of each of them is honoured (the request is answered on that pod and
// port); unsteered round-robin picks land on their picks too.
func TestMultipleTargetPorts(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP, TargetPorts: []int32{8000, 8001, 8002}})
	h.waitPicking(get())
	for _, ip := range []string{pod13, pod14, pod15} {
		for _, port := range []int{8000, 8001, 8002} {
			want := net.JoinHostPort(ip, strconv.Itoa(port))
			// Each steered at least twice: a pick of a port must not be a lucky one.
			for range 2 {
				res := h.mustSend(get().with("test-epp-endpoint-selection", want))
				if got := h.landedOnPick(res); got != want {
					t.Fatalf("%v: the EPP picked %s, not the steered %s", res, got, want)
				}
			}
		}
	}
	ports := map[string]int{}
	for range 27 {
		_, port, _ := net.SplitHostPort(h.landedOnPick(h.mustSend(get())))
		ports[port]++
	}
	t.Logf("unsteered picks by port: %v", ports)
}
