// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"context"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// headersAnswer is a processor that answers the request headers with cr
// and closes the stream.
func headersAnswer(cr *extprocsvc.CommonResponse) func(extprocsvc.ExternalProcessor_ProcessServer, *fakeProcessor) error {
	return func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		if _, err := f.recv(s); err != nil {
			return err
		}
		return s.Send(&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_RequestHeaders{
			RequestHeaders: &extprocsvc.HeadersResponse{Response: cr}}})
	}
}

func headersOnly() *extprocv3.ProcessingMode {
	return &extprocv3.ProcessingMode{RequestHeaderMode: extprocv3.ProcessingMode_SEND, ResponseHeaderMode: extprocv3.ProcessingMode_SKIP}
}

// The route cache is cleared as DecodingProcessorState::clearRouteCache
// does: only by a response with a header mutation; then DEFAULT needs
// clear_route_cache, CLEAR does not, RETAIN never clears.
func TestProcessClearsRouteCacheAsEnvoy(t *testing.T) {
	withMutation := func(clear bool) *extprocsvc.CommonResponse {
		return &extprocsvc.CommonResponse{ClearRouteCache: clear, HeaderMutation: mutationSet("x-gateway-model-name", "m")}
	}
	for _, tc := range []struct {
		name   string
		action extprocv3.ExternalProcessor_RouteCacheAction
		cr     *extprocsvc.CommonResponse
		want   bool
	}{
		{"DEFAULT, mutation and clear_route_cache", extprocv3.ExternalProcessor_DEFAULT, withMutation(true), true},
		{"DEFAULT, mutation without clear_route_cache", extprocv3.ExternalProcessor_DEFAULT, withMutation(false), false},
		{"DEFAULT, clear_route_cache without mutation", extprocv3.ExternalProcessor_DEFAULT, &extprocsvc.CommonResponse{ClearRouteCache: true}, false},
		{"CLEAR, mutation", extprocv3.ExternalProcessor_CLEAR, withMutation(false), true},
		{"CLEAR, empty mutation", extprocv3.ExternalProcessor_CLEAR, &extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{}}, true},
		{"CLEAR, no mutation", extprocv3.ExternalProcessor_CLEAR, &extprocsvc.CommonResponse{}, false},
		{"CLEAR, no response", extprocv3.ExternalProcessor_CLEAR, nil, false},
		{"RETAIN, mutation and clear_route_cache", extprocv3.ExternalProcessor_RETAIN, withMutation(true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, dial := startProcessor(t, headersAnswer(tc.cr))
			cfg := testConfig(false)
			cfg.ProcessingMode, cfg.RouteCacheAction = headersOnly(), tc.action
			up := &fakeUpstream{respBody: "ok"}
			resp, err := Process(context.Background(), cfg, dial, getRequest(), up.call)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			f.waitDone(t)
			if up.req.RouteCacheCleared != tc.want {
				t.Errorf("RouteCacheCleared = %t, want %t", up.req.RouteCacheCleared, tc.want)
			}
		})
	}
}

// Mutation rules as Checker::isAllowed: routing headers (host,
// :authority, :method, :scheme) and x-envoy-* are ignored by default and
// counted; disallow_system adds every ':' header (so :path); disallow_all
// everything; disallow_is_error turns an ignored change into a failed
// request; ':'-headers and host are never removed.
func TestProcessMutationRulesAsEnvoy(t *testing.T) {
	set := func(k, v string) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}}
	}
	mut := &extprocsvc.HeaderMutation{
		SetHeaders: []*corev3.HeaderValueOption{
			set(":authority", "evil.example.com"), set("host", "evil2.example.com"), set(":method", "DELETE"),
			set(":scheme", "https"), set("x-envoy-original-path", "/x"), set(":path", "/rewritten"), set("x-model", "m"),
		},
		RemoveHeaders: []string{"x-test-request-id", ":path", "host"},
	}
	for _, tc := range []struct {
		name                       string
		rules                      MutationRules
		status                     int // 0: forwarded upstream
		authority, method, path    string
		model                      string
		requestIDKept, envoyHeader bool
		rejected                   int64
	}{
		{name: "defaults", authority: "llm.example.com", method: "GET", path: "/rewritten", model: "m", rejected: 7},
		{name: "allow_all_routing", rules: MutationRules{AllowAllRouting: true}, authority: "evil2.example.com", method: "DELETE", path: "/rewritten", model: "m", rejected: 3},
		{name: "allow_envoy", rules: MutationRules{AllowEnvoy: true}, authority: "llm.example.com", method: "GET", path: "/rewritten", model: "m", envoyHeader: true, rejected: 6},
		{name: "disallow_system", rules: MutationRules{DisallowSystem: true}, authority: "llm.example.com", method: "GET", path: "/v1/models", model: "m", rejected: 8},
		{name: "disallow_all", rules: MutationRules{DisallowAll: true}, authority: "llm.example.com", method: "GET", path: "/v1/models", requestIDKept: true, rejected: 10},
		{name: "disallow_is_error", rules: MutationRules{DisallowIsError: true}, status: 500, rejected: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, dial := startProcessor(t, headersAnswer(&extprocsvc.CommonResponse{HeaderMutation: mut}))
			cfg := testConfig(false)
			cfg.ProcessingMode, cfg.MutationRules = headersOnly(), tc.rules
			up := &fakeUpstream{respBody: "ok"}
			resp, err := Process(context.Background(), cfg, dial, getRequest(), up.call)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			f.waitDone(t)
			if got := cfg.Counters.RejectedHeaderMutations.Load(); got != tc.rejected {
				t.Errorf("rejected header mutations = %d, want %d", got, tc.rejected)
			}
			if tc.status != 0 {
				if resp.Status != tc.status || up.calls() != 0 {
					t.Fatalf("status %d, upstream calls %d; want %d and none", resp.Status, up.calls(), tc.status)
				}
				return
			}
			r := up.req
			if r.Authority != tc.authority || r.Method != tc.method || r.Path != tc.path || r.Scheme != "http" && !tc.rules.AllowAllRouting {
				t.Errorf("upstream %s %s %s %s, want %s %s %s", r.Method, r.Scheme, r.Authority, r.Path, tc.method, tc.authority, tc.path)
			}
			if got := r.Headers.Get("X-Model"); got != tc.model {
				t.Errorf("x-model = %q, want %q", got, tc.model)
			}
			if got := r.Headers.Get("X-Test-Request-Id") != ""; got != tc.requestIDKept {
				t.Errorf("x-test-request-id kept = %t, want %t", got, tc.requestIDKept)
			}
			if got := r.Headers.Get("X-Envoy-Original-Path") != ""; got != tc.envoyHeader {
				t.Errorf("x-envoy-original-path set = %t, want %t", got, tc.envoyHeader)
			}
		})
	}
}
