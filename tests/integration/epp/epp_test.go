// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package epp_test

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

// pickBound bounds the wait for a first pick after Start: the pod informer
// (and for the full EPP its first scrape of both pods) trails readiness.
const pickBound = 60 * time.Second

// completion is the request body of the tests, as a client sends it.
const completion = `{"model":"` + model + `","prompt":"hi"}`

func TestEndpointPickers(t *testing.T) {
	c := startCluster(t)
	cfg := func(k epp.Kind, tls bool) epp.Config {
		return epp.Config{Kind: k, Kubeconfig: c.env.Kubeconfig, PoolNamespace: namespace, PoolName: poolName, TLS: tls}
	}
	t.Run("lwepp", func(t *testing.T) { testLWEPP(t, c, cfg(epp.LWEPP, false)) })
	t.Run("lwepp-tls", func(t *testing.T) { testLWEPPTLS(t, c, cfg(epp.LWEPP, true)) })
	t.Run("epp", func(t *testing.T) { testFullEPP(t, c, cfg(epp.FullEPP, false)) })
}

// checkPick fails unless the header and the metadata agree on one pod.
func (c *cluster) checkPick(t *testing.T, p pick) {
	t.Helper()
	if p.header != p.metadata || !slices.Contains(c.addrs, p.header) {
		t.Fatalf("pick: header %q, metadata %q; want both equal to one of %q", p.header, p.metadata, c.addrs)
	}
}

func testLWEPP(t *testing.T, c *cluster, cfg epp.Config) {
	p := epp.Start(t, cfg)
	conn := p.Dial(t)
	get := requestHeaders("GET", true)

	t.Run("headers only: round robin over both pods", func(t *testing.T) {
		first, _ := untilPick(t, conn, pickBound, get)
		c.checkPick(t, first)
		seen := map[string]int{first.header: 1}
		for range 5 {
			resps, err := exchange(conn, get)
			if err != nil {
				t.Fatalf("stream: %v\n%s", err, describe(resps))
			}
			pk, ok := pickOf(resps)
			if !ok || len(resps) != 1 {
				t.Fatalf("want exactly one request_headers response, got:\n%s", describe(resps))
			}
			c.checkPick(t, pk)
			seen[pk.header]++
		}
		// Round robin over the datastore's pod list (a sync.Map's order,
		// stable while the pods do not change): both pods, in turn.
		t.Logf("6 picks: %v", seen)
		if len(seen) != 2 {
			t.Fatalf("6 picks: %v; want both pods (round robin)", seen)
		}
	})

	t.Run("test-epp-endpoint-selection steers", func(t *testing.T) {
		for range 3 {
			resps, err := exchange(conn, requestHeaders("GET", true, "test-epp-endpoint-selection", c.addrs[1]))
			pk, _ := pickOf(resps)
			if err != nil || pk.header != c.addrs[1] || pk.metadata != c.addrs[1] {
				t.Fatalf("steered to %s: err %v, responses:\n%s", c.addrs[1], err, describe(resps))
			}
		}
		// A selection naming no pod of the pool: lwepp keeps the empty
		// candidate set and the stream fails.
		resps, err := exchange(conn, requestHeaders("GET", true, "test-epp-endpoint-selection", "10.244.99.99:8000"))
		t.Logf("selection of a non-member: stream error %v, responses:\n%s", err, describe(resps))
		if err == nil {
			t.Fatalf("a selection of no pool member picked:\n%s", describe(resps))
		}
	})

	// GIE v1.6.1 fixed lwepp's body answers under FULL_DUPLEX_STREAMED
	// (kubernetes-sigs/gateway-api-inference-extension#3035; v1.6.0 answered
	// each body chunk with an empty response, the first one before the
	// deferred headers response, and Envoy ended every such request with a
	// 500). What v1.6.2 must answer (pkg/lwepp/handlers/server.go): nothing
	// until the body's last chunk; then the headers response with the pick,
	// first; then the whole body back as streamed_response, ending the stream.
	t.Run("request body under FULL_DUPLEX_STREAMED: the pick first, then the body back whole", func(t *testing.T) {
		msgs := append([]*extprocv3.ProcessingRequest{requestHeaders("POST", false)}, bodyChunks(completion, 3)...)
		resps, err := exchange(conn, msgs...)
		t.Logf("lwepp %s, POST with a 3-chunk body: stream error %v, responses in order:\n%s", epp.LWEPPVersion, err, describe(resps))
		if err != nil {
			t.Fatalf("stream failed: %v", err)
		}
		if len(resps) < 2 || resps[0].GetRequestHeaders() == nil {
			t.Fatalf("want the request_headers response first, then the body; got:\n%s", describe(resps))
		}
		pk, _ := pickOf(resps)
		c.checkPick(t, pk)
		for i, r := range resps[1:] {
			if r.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse() == nil {
				t.Fatalf("response %d is not a request_body with streamed_response, which FULL_DUPLEX_STREAMED requires:\n%s", i+1, describe(resps))
			}
		}
		if body, eos := streamedBody(resps); body != completion || !eos {
			t.Fatalf("streamed body %q (end_of_stream %v), want %q", body, eos, completion)
		}
	})

	t.Run("response body under FULL_DUPLEX_STREAMED: every chunk back, in order", func(t *testing.T) {
		const answer = `{"object":"list","data":[{"id":"` + model + `"}]}`
		msgs := append([]*extprocv3.ProcessingRequest{requestHeaders("GET", true), responseHeaders()}, responseBodyChunks(answer, 3)...)
		resps, err := exchange(conn, msgs...)
		t.Logf("lwepp %s, GET whose response has a 3-chunk body: stream error %v, responses in order:\n%s", epp.LWEPPVersion, err, describe(resps))
		if err != nil {
			t.Fatalf("stream failed: %v", err)
		}
		if len(resps) < 3 || resps[0].GetRequestHeaders() == nil || resps[1].GetResponseHeaders() == nil {
			t.Fatalf("want request_headers, response_headers, then the response body; got:\n%s", describe(resps))
		}
		pk, _ := pickOf(resps)
		c.checkPick(t, pk)
		for i, r := range resps[2:] {
			if r.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse() == nil {
				t.Fatalf("response %d is not a response_body with streamed_response:\n%s", i+2, describe(resps))
			}
		}
		if body, eos := streamedResponseBody(resps); body != answer || !eos {
			t.Fatalf("streamed response body %q (end_of_stream %v), want %q", body, eos, answer)
		}
	})

	t.Run("restart keeps the address", func(t *testing.T) {
		addr := p.Addr()
		p.Restart(t)
		if p.Addr() != addr {
			t.Fatalf("address changed: %s -> %s", addr, p.Addr())
		}
		pk, _ := untilPick(t, conn, pickBound, get)
		c.checkPick(t, pk)
	})

	t.Run("stop closes the port", func(t *testing.T) {
		p.Stop()
		if nc, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
			nc.Close()
			t.Fatalf("%s still accepts connections after Stop", p.Addr())
		}
		p.Stop() // idempotent
	})
}

func testLWEPPTLS(t *testing.T, c *cluster, cfg epp.Config) {
	p := epp.Start(t, cfg)
	pk, _ := untilPick(t, p.Dial(t), pickBound, requestHeaders("GET", true))
	c.checkPick(t, pk)

	// A plaintext client gets no answer from the TLS port.
	plain := epp.Start(t, epp.Config{Kind: epp.LWEPP, Kubeconfig: cfg.Kubeconfig, PoolNamespace: cfg.PoolNamespace, PoolName: cfg.PoolName})
	if plain.Addr() == p.Addr() {
		t.Fatalf("two EPPs share %s", p.Addr())
	}
	began := time.Now()
	_, err := exchange(dialPlain(t, p.Addr()), requestHeaders("GET", true))
	if err == nil {
		t.Fatal("plaintext ext_proc to the TLS port succeeded")
	}
	t.Logf("plaintext ext_proc to the TLS port fails after %v: %v", time.Since(began).Round(time.Millisecond), err)
}

func testFullEPP(t *testing.T, c *cluster, cfg epp.Config) {
	p := epp.Start(t, cfg)
	conn := p.Dial(t)

	t.Run("body in chunks: pick, body streamed back", func(t *testing.T) {
		msgs := append([]*extprocv3.ProcessingRequest{requestHeaders("POST", false)}, bodyChunks(completion, 3)...)
		pk, resps := untilPick(t, conn, pickBound, msgs...)
		t.Logf("epp %s, POST with a 3-chunk body, responses in order:\n%s", epp.FullEPPVersion, describe(resps))
		c.checkPick(t, pk)
		if resps[0].GetRequestHeaders() == nil {
			t.Fatalf("the headers response is not first:\n%s", describe(resps))
		}
		if body, eos := streamedBody(resps); body != completion || !eos {
			t.Fatalf("streamed body %q (end_of_stream %v), want %q", body, eos, completion)
		}
		// The scheduler is metrics-aware and reaches the pods: both get
		// scraped at podIP:targetPorts[0]/metrics (every 50 ms by default;
		// the first pick may come before the first scrape, so wait for it).
		poll.UntilOr(t, 30*time.Second, "both pods scraped at podIP:8000/metrics", func() bool {
			return c.pods[0].scrapes.Load() > 0 && c.pods[1].scrapes.Load() > 0
		}, func() string {
			return fmt.Sprintf("scrapes: %s %d, %s %d", c.addrs[0], c.pods[0].scrapes.Load(), c.addrs[1], c.pods[1].scrapes.Load())
		})
	})

	t.Run("headers only: a pod of the pool", func(t *testing.T) {
		resps, err := exchange(conn, requestHeaders("GET", true))
		pk, ok := pickOf(resps)
		if err != nil || !ok {
			t.Fatalf("stream error %v, responses:\n%s", err, describe(resps))
		}
		c.checkPick(t, pk)
	})
}
