// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

// The seed end to end (examples/seed: its model servers, EPP, pool and
// route, and its request).
//
// EPP: the full, metrics-aware EPP (GIE v1.0.0), serving TLS, with the
// seed's DestinationRule (SIMPLE, insecureSkipVerify) on its Service, so the
// Gateway proxy must talk TLS to it. Request shape: the seed's POST
// /v1/completions with a JSON body (model reviews-1): the full EPP reads the
// model from the body and handles bodies correctly, and its picks follow the
// pods' load, which the last phase needs.
//
// Proves: the seed's request returns 200 from one of the three pods; 100
// requests each land on the pod and port the EPP picked for them (the
// recording proxy's record against the simulator's x-inference-pod and
// x-inference-port); with one pod loaded (ten long requests running, held
// by the simulator's hold gate: over 30% of its KV cache, which the EPP's
// KV-cache scorer reads from vllm:kv_cache_usage_perc), the EPP stops
// picking it: 10 consecutive picks avoid it within waitEPP, and then 0 of
// the next 50 land on it.
func TestSeedEndToEnd(t *testing.T) {
	h := newHarness(t, options{EPP: epp.FullEPP, TLS: true})
	h.waitPicking(completion(seedPrompt))
	pods := map[string]bool{podName(pod13): true, podName(pod14): true, podName(pod15): true}

	// The seed's request, as its write-up sends it.
	res := h.mustSend(completion(seedPrompt))
	h.landedOnPick(res)
	if !pods[res.Pod] {
		t.Fatalf("%v: x-inference-pod is not one of the pool's pods", res)
	}
	if !containsAll(string(res.Body), `"object":"text_completion"`, `"model":"reviews-1"`) {
		t.Fatalf("%v: not a completion of model reviews-1", res)
	}

	// 100 requests, each with a prompt of its own (so the prefix-cache
	// scorer has no affinity), each landing on its recorded pick.
	picked := map[string]int{}
	for i := range 100 {
		res := h.mustSend(completion(fmt.Sprintf("request %d. %s", i, seedPrompt)))
		picked[h.landedOnPick(res)]++
	}
	t.Logf("picks of 100 requests: %v", picked)
	loaded := net.JoinHostPort(pod13, "8000")
	if picked[loaded] == 0 {
		t.Fatalf("picks %v: the EPP never picked %s while idle, so moving away from it would prove nothing", picked, loaded)
	}

	// Load pod 13 directly (not through the Gateway): 10 requests of 610
	// tokens (39 KV blocks each, of 1024) held running by gate "load". No
	// request waits, so a probe the EPP still sends there is answered at
	// once.
	sim := h.sims[pod13]
	var held sync.WaitGroup
	t.Cleanup(func() { sim.Release("load"); held.Wait() })
	long := strings.Repeat("word ", 600)
	for i := range 10 {
		held.Go(func() {
			body := fmt.Sprintf(`{"model":%q,"prompt":"held %d %s","max_tokens":100}`, loraModel, i, long)
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost,
				"http://"+loaded+"/v1/completions", bytes.NewReader([]byte(body)))
			if err != nil {
				return
			}
			req.Header.Set(vllmsim.HoldHeader, "load")
			if resp, err := gatewayClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitEPP)
	defer cancel()
	if st, err := sim.WaitUntil(ctx, func(s vllmsim.Stats) bool { return s.Running == 10 && s.KVCacheUsage > 0.3 }); err != nil {
		t.Fatalf("pod 13 never loaded: %+v: %v", st, err)
	}

	// The EPP sees the load on its next scrapes: wait (bounded) for 10
	// consecutive picks elsewhere.
	deadline := time.Now().Add(waitEPP)
	for run, n := 0, 0; run < 10; n++ {
		if time.Now().After(deadline) {
			t.Fatalf("the EPP still picks the loaded %s after %d requests and %v", loaded, n, waitEPP)
		}
		if h.landedOnPick(h.mustSend(completion(fmt.Sprintf("probe %d. %s", n, seedPrompt)))) == loaded {
			run = 0
		} else {
			run++
		}
	}
	// The bound: none of the next 50 picks is the loaded pod. Its KV-cache
	// use stays while the gate is closed, the other pods' is 0 between
	// requests, queues are empty everywhere and prompts share no prefix, so
	// the scores rank it strictly last.
	after := map[string]int{}
	for i := range 50 {
		after[h.landedOnPick(h.mustSend(completion(fmt.Sprintf("loaded %d. %s", i, seedPrompt))))]++
	}
	t.Logf("picks of 50 requests with %s loaded: %v", loaded, after)
	if after[loaded] != 0 {
		t.Fatalf("picks %v: the EPP picked the loaded %s %d times of 50", after, loaded, after[loaded])
	}
}
