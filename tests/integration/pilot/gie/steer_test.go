// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/epp"
)

// A client cannot steer traffic.
//
// EPP: the full EPP (GIE v1.0.0, plaintext: no DestinationRule). Request
// shape: the seed's POST /v1/completions, each with a prompt of its own, so
// that idle pods tie and the EPP's picks spread over the pool. Then, with
// the EPP stopped, GET /health: no body, so
// the FailOpen pool fails open before any body reaches the filter.
//
// The full EPP makes this sharp: its request-headers answer sets
// x-gateway-destination-endpoint to its pick and then echoes every request
// header it received (pkg/epp/handlers/request.go generateHeaders at
// v1.0.0), the client's forged x-gateway-destination-endpoint included, which
// overwrites the first. So the header mutation names the client's endpoint
// while the envoy.lb metadata names the pick: the gateway must route on the
// metadata.
//
// Proves: a client's own x-gateway-destination-endpoint header, and headers
// named like the protocol's other keys and metadata, never move a request
// off the EPP's (metadata) pick; the data plane applies the EPP's header
// mutation as given (the model server gets one value of the header, the
// mutation's last); with the EPP down, the fallback balances over the pool
// and ignores the client's header too.
func TestClientCannotSteer(t *testing.T) {
	h := newHarness(t, options{EPP: epp.FullEPP})
	h.waitPicking(completion(seedPrompt))
	target := net.JoinHostPort(pod15, "8000") // where the client tries to go
	forged := func(r request) request {
		return r.with("x-gateway-destination-endpoint", target).
			with("x-gateway-destination-endpoint-served", target).
			with("x-gateway-destination-endpoint-subset", target).
			with("x-envoy-original-dst-host", target).
			with("envoy.lb", "x-gateway-destination-endpoint="+target)
	}

	picks := map[string]int{}
	for i := range 30 {
		res := h.mustSend(forged(completion(fmt.Sprintf("steer %d. %s", i, seedPrompt))))
		pick, rec := h.landedOnMetadataPick(res)
		picks[pick]++
		ip, _, _ := net.SplitHostPort(pick)
		last, ok := h.sims[ip].LastRequest()
		if !ok {
			t.Fatalf("%v: %s saw no request", res, podName(ip))
		}
		if v := last.Header.Values("X-Gateway-Destination-Endpoint"); len(v) != 1 || v[0] != rec.PickedHeader {
			t.Fatalf("%v: %s received x-gateway-destination-endpoint %q, want the EPP's mutation's %q", res, podName(ip), v, rec.PickedHeader)
		}
	}
	t.Logf("picks with forged headers: %v", picks)
	if picks[target] == 30 {
		t.Fatalf("every pick was the client's %s: nothing here tells a steered request from a picked one", target)
	}

	// EPP down: FailOpen falls back to the cluster's own balancing, which
	// must not read the client's header either.
	h.epp.Stop()
	served := map[string]int{}
	for range 30 {
		res := h.mustSend(forged(get()))
		if res.Status != http.StatusOK {
			t.Fatalf("%v: FailOpen with the EPP down must still serve", res)
		}
		served[res.Pod]++
	}
	t.Logf("served with the EPP down: %v", served)
	if len(served) < 2 || served[podName(pod15)] > 20 {
		t.Fatalf("served %v with the EPP down: the client's header steered the fallback", served)
	}
}
