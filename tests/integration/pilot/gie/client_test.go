// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/infermesh/infermesh/pkg/test/eppproxy"
	"github.com/infermesh/infermesh/pkg/test/seed"
	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

// seedPrompt is the prompt of the seed's request.
const seedPrompt = seed.Prompt

// request is one request to the Gateway.
type request struct {
	Method string // default GET
	Path   string // default /health
	Body   []byte
	Header map[string]string
}

// completion is the seed's request shape: POST /v1/completions, model
// reviews-1, the given prompt, max_tokens 100, temperature 0.
func completion(prompt string) request {
	body, _ := json.Marshal(map[string]any{"model": loraModel, "prompt": prompt, "max_tokens": 100, "temperature": 0})
	return request{Method: http.MethodPost, Path: "/v1/completions", Body: body,
		Header: map[string]string{"Content-Type": "application/json"}}
}

// get is GET /health: no request body, so the EPP picks on the headers
// alone, and no response body (the simulator answers 200 with its pod
// headers only). The cheapest request, which the scenarios about routing,
// restarts and churn send; it is also the only shape that can fail open once
// its EPP stream has started (Envoy honours failure_mode_allow only until a
// FULL_DUPLEX_STREAMED body has reached the processor). Bodies through lwepp
// are TestLWEPPBodies's.
func get() request { return request{Method: http.MethodGet, Path: "/health"} }

// getModels is GET /v1/models: no request body, a JSON response body.
func getModels() request { return request{Method: http.MethodGet, Path: "/v1/models"} }

// with returns r with header k: v added.
func (r request) with(k, v string) request {
	h := map[string]string{}
	for a, b := range r.Header {
		h[a] = b
	}
	h[k] = v
	r.Header = h
	return r
}

// result is what the client saw.
type result struct {
	ID     string // the x-test-request-id sent
	Status int
	Pod    string // x-inference-pod
	Port   string // x-inference-port
	Body   []byte
	Err    error // transport error (no response)
}

func (r result) String() string {
	return fmt.Sprintf("request %s: status %d pod %q port %q err %v body %.200q", r.ID, r.Status, r.Pod, r.Port, r.Err, r.Body)
}

var requestSeq atomic.Int64

// send sends r to the Gateway with Host llm.ssup2.com and a unique
// x-test-request-id (the recording proxy's key). Transport errors are
// returned in the result, not fatal, so it is safe from any goroutine.
func (h *harness) send(ctx context.Context, r request) result {
	id := fmt.Sprintf("%s-%d", h.t.Name(), requestSeq.Add(1))
	res := result{ID: id}
	method, path := r.Method, r.Path
	if method == "" {
		method = http.MethodGet
	}
	if path == "" {
		path = "/health"
	}
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+h.gw.Addr()+path, body)
	if err != nil {
		res.Err = err
		return res
	}
	req.Host = seed.Hostname
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	req.Header.Set(eppproxy.DefaultRequestIDHd, id)
	resp, err := gatewayClient.Do(req)
	if err != nil {
		res.Err = err
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	res.Pod, res.Port = resp.Header.Get(vllmsim.PodHeader), resp.Header.Get(vllmsim.PortHeader)
	res.Body, res.Err = io.ReadAll(resp.Body)
	return res
}

// gatewayClient keeps no idle connections across tests' gateways.
var gatewayClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// mustSend sends r and fails the test on a transport error.
func (h *harness) mustSend(r request) result {
	h.t.Helper()
	res := h.send(h.t.Context(), r)
	if res.Err != nil {
		h.t.Fatal(res)
	}
	return res
}

// pick is the EPP's recorded pick for res: envoy.lb /
// x-gateway-destination-endpoint in the dynamic metadata of the stream that
// carried res's request id, as the recording proxy saw it. That is what the
// gateway routes on (override_host reads the metadata, never the header).
func (h *harness) pick(res result) (string, eppproxy.Record) {
	h.t.Helper()
	rec, ok := h.proxy.Record(res.ID)
	if !ok {
		h.t.Fatalf("%v: the recording proxy saw no EPP stream for it", res)
	}
	return rec.PickedMetadata, rec
}

// landedOnPick asserts that res is a 200 from the pod and port the EPP
// picked for it (the recorded pick, never an assumption), that the EPP named
// it the same way in the header and the metadata, and returns the pick.
func (h *harness) landedOnPick(res result) string {
	h.t.Helper()
	pick, rec := h.landedOnMetadataPick(res)
	if rec.PickedHeader != pick {
		h.t.Fatalf("%v: EPP's pick in metadata %q and header %q differ", res, pick, rec.PickedHeader)
	}
	return pick
}

// landedOnMetadataPick is landedOnPick without the header check, for
// requests whose own headers the EPP may echo into its header mutation.
func (h *harness) landedOnMetadataPick(res result) (string, eppproxy.Record) {
	h.t.Helper()
	if res.Status != http.StatusOK || res.Err != nil {
		h.t.Fatalf("%v: want a complete 200", res)
	}
	pick, rec := h.pick(res)
	ip, port, err := net.SplitHostPort(pick)
	if err != nil {
		h.t.Fatalf("%v: EPP's pick %q (record %+v) is not ip:port", res, pick, rec)
	}
	if res.Pod != podName(ip) || res.Port != port {
		h.t.Fatalf("%v: served by %s:%s, but the EPP picked %s (%s)", res, res.Pod, res.Port, pick, podName(ip))
	}
	return pick, rec
}

// waitPicking waits (bounded) until the EPP answers r with a pick: the EPP's
// pod informer and, for the full EPP, its first metrics scrapes trail its
// readiness, and until then it answers without one (Unavailable). Whether
// the request then succeeds is for the test to assert.
func (h *harness) waitPicking(r request) {
	h.t.Helper()
	deadline := time.Now().Add(waitEPP)
	for interval := 5 * time.Millisecond; ; interval = min(2*interval, 200*time.Millisecond) {
		last := h.send(h.t.Context(), r)
		rec, ok := h.proxy.Record(last.ID)
		if ok && rec.PickedMetadata != "" {
			return
		}
		if time.Now().After(deadline) {
			var dp string
			if d := h.dataPlane(); d != nil {
				c := d.ExtProcCounters()
				dp = fmt.Sprintf("; data plane ext_proc: %d streams started, %d failed, %d failures allowed (fail open)",
					c.StreamsStarted.Load(), c.StreamsFailed.Load(), c.FailureModeAllowed.Load())
			}
			h.t.Fatalf("the EPP did not pick within %v: last %v, record %+v, %d streams recorded%s\nEPP log tail:\n%s",
				waitEPP, last, rec, len(h.proxy.Records()), dp, tail(h.epp.Logs(), 4000))
		}
		time.Sleep(interval) // back-off between probes of a bounded poll, not synchronisation
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
