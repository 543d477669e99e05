// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

// lwepp in the default body mode, with bodies both ways.
//
// EPP: the lightweight EPP (GIE v1.6.2) behind TLS, as the seed deploys it
// (its DestinationRule: SIMPLE, insecureSkipVerify); the GatewayClass has no
// parameters, so both body modes are FULL_DUPLEX_STREAMED, as an Istio
// install and GIE's guides have them. Request shapes: GET /health (no body
// either way), GET /v1/models (a response body), the seed's POST
// /v1/completions (a request body), and a POST whose prompt is long enough
// (about 70 KB) that the data plane sends it to the EPP in several chunks
// (32 KB reads) and lwepp answers it in others (62,000-byte pieces).
//
// Why: lwepp v1.6.0 answered each body chunk with an empty response, the
// first before its deferred headers response; under FULL_DUPLEX_STREAMED
// Envoy takes that for a spurious message and ends the request with a 500
// (kubernetes-sigs/gateway-api-inference-extension#3035). v1.6.1 fixed it
// (pkg/lwepp/handlers/server.go: request body chunks held until the headers
// response with the pick is sent, then streamed back whole as
// streamed_response; each response body chunk streamed back).
//
// Proves, through pilot-discovery's xDS and the data plane: every request of
// each shape is a 200 from the pod and port of its recorded pick; each
// POST's body reaches that model server byte for byte (its last request's
// body is the one sent, and its answer counts the prompt's words); the GET
// /v1/models response body reaches the client whole (the model list); and,
// on the test data plane, not one spurious ext_proc message, error local
// reply or failure_mode_allow continuation, and the long POST's body went
// to lwepp in at least three chunks and came back in two.
func TestLWEPPBodies(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP, TLS: true})
	h.waitPicking(completion(seedPrompt))

	dp := h.dataPlane()
	type counts struct{ spurious, local, allowed int64 }
	read := func() counts {
		if dp == nil {
			return counts{}
		}
		c := dp.ExtProcCounters()
		return counts{c.SpuriousMessages.Load(), c.LocalReplies.Load(), c.FailureModeAllowed.Load()}
	}
	before := read()

	seen := map[string]int{}
	for range 10 {
		seen[h.landedOnPick(h.mustSend(get()))]++
	}
	t.Logf("GET /health picks: %v", seen)

	// A response body: the model list, whole.
	for range 5 {
		res := h.mustSend(getModels())
		h.landedOnPick(res)
		var list vllmsim.ModelList
		if err := json.Unmarshal(res.Body, &list); err != nil || len(list.Data) == 0 || list.Data[0].ID != baseModel {
			t.Fatalf("%v: want the model list naming %s, whole (%v)", res, baseModel, err)
		}
	}

	// Request bodies: the seed's, then one sent in several chunks.
	var long strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&long, "w%05d ", i)
	}
	for _, tc := range []struct {
		name   string
		prompt string
		n      int
		chunks int // the fewest request body chunks the test data plane sends
	}{
		{"the seed's POST", seedPrompt, 10, 1},
		{"a 70 KB prompt", long.String(), 3, 3},
	} {
		picks := map[string]int{}
		for range tc.n {
			req := completion(tc.prompt)
			res := h.mustSend(req)
			pick := h.landedOnPick(res)
			picks[pick]++
			if rec, _ := h.proxy.Record(res.ID); dp != nil && tc.chunks > 1 &&
				(rec.FromDataPlane < 1+tc.chunks+1 || rec.FromEPP < 1+2+1) {
				t.Fatalf("%s: %v: %d messages from the data plane, %d from lwepp; want the body in at least %d chunks to lwepp "+
					"(32 KB reads) and back in 2 (62,000-byte pieces), plus headers each way", tc.name, res, rec.FromDataPlane, rec.FromEPP, tc.chunks)
			}
			ip, _, _ := net.SplitHostPort(pick)
			last, ok := h.sims[ip].LastRequest()
			if !ok || !bytes.Equal(last.Body, req.Body) {
				t.Fatalf("%s: %v: %s received a body of %d bytes, not the %d sent (first difference at byte %d)",
					tc.name, res, podName(ip), len(last.Body), len(req.Body), firstDiff(last.Body, req.Body))
			}
			var answer vllmsim.CompletionResponse
			if err := json.Unmarshal(res.Body, &answer); err != nil || answer.Usage == nil ||
				answer.Usage.PromptTokens != len(strings.Fields(tc.prompt)) || len(answer.Choices) != 1 {
				t.Fatalf("%s: %v: want a completion counting the prompt's %d words (%v)", tc.name, res, len(strings.Fields(tc.prompt)), err)
			}
		}
		t.Logf("%s (%d bytes): picks %v", tc.name, len(completion(tc.prompt).Body), picks)
	}

	if dp != nil {
		d := read()
		if d.spurious != before.spurious || d.local != before.local || d.allowed != before.allowed {
			t.Errorf("ext_proc: %d spurious messages, %d error local replies, %d failure_mode_allow continuations; want 0 of each",
				d.spurious-before.spurious, d.local-before.local, d.allowed-before.allowed)
		}
	}
}

// firstDiff is the index of the first byte where a and b differ (the
// shorter length when one is a prefix of the other).
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Multiple target ports.
//
// EPP: lwepp (GIE v1.6.2; the full EPP v1.0.0 supports one target port
// only). Request shapes: the seed's POST /v1/completions, steered, and GET
// /health, bodiless, unsteered.
// lwepp lists one endpoint per pod and target port, and, as in the
// conformance suite, narrows its candidates to the ip:port list in the
// request header test-epp-endpoint-selection (pkg/lwepp/handlers/request.go
// at v1.6.2), so the test steers each pick.
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
				res := h.mustSend(completion(seedPrompt).with("test-epp-endpoint-selection", want))
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
