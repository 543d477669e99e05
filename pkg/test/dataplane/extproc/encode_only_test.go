// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"context"
	"net/http"
	"testing"

	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// corsReply is a CORS filter's preflight answer: 200, headers only.
func corsReply() *Response {
	h := http.Header{}
	h.Set("access-control-allow-origin", "https://app.example.com")
	return &Response{Status: 200, Headers: h, Body: http.NoBody, Trailers: http.Header{}}
}

// A reply an earlier decoder filter made reaches ext_proc's encodeHeaders
// without a decodeHeaders (Envoy's filter manager starts such a reply at
// the first encoder filter): the stream opens with response_headers,
// end_of_stream true, carrying protocol_config; failure_mode_allow keeps
// the reply, otherwise the error reply is sent directly (no other encoder
// filter sees it).
func TestProcessResponseOnly(t *testing.T) {
	t.Run("answered", func(t *testing.T) {
		f, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
			if _, err := f.recv(s); err != nil {
				return err
			}
			return s.Send(&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{}}})
		})
		resp, err := ProcessResponse(context.Background(), testConfig(false), dial, corsReply())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != 200 || resp.Headers.Get("access-control-allow-origin") == "" || resp.Direct {
			t.Errorf("got %d %v direct=%v, want the reply unchanged", resp.Status, resp.Headers, resp.Direct)
		}
		f.waitDone(t)
		ms := f.messages()
		if len(ms) != 1 || ms[0].GetResponseHeaders() == nil || !ms[0].GetResponseHeaders().GetEndOfStream() || ms[0].GetProtocolConfig() == nil {
			t.Fatalf("messages %v, want one response_headers with end_of_stream and protocol_config", kinds(ms))
		}
	})
	for _, allow := range []bool{true, false} {
		name := map[bool]string{true: "error, allowed", false: "error, not allowed"}[allow]
		t.Run(name, func(t *testing.T) {
			f, dial := startProcessor(t, failing)
			cfg := testConfig(allow)
			resp, err := ProcessResponse(context.Background(), cfg, dial, corsReply())
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(f.messages()); len(got) != 1 || got[0] != "response_headers" {
				t.Fatalf("messages %v, want [response_headers]", got)
			}
			if allow {
				if resp.Status != 200 || resp.Direct || cfg.Counters.FailureModeAllowed.Load() != 1 {
					t.Errorf("got %d direct=%v allowed=%d, want the reply continued", resp.Status, resp.Direct, cfg.Counters.FailureModeAllowed.Load())
				}
				return
			}
			if resp.Status != 500 || !resp.Direct || resp.Headers.Get("access-control-allow-origin") != "" {
				t.Errorf("got %d direct=%v %v, want a direct 500", resp.Status, resp.Direct, resp.Headers)
			}
		})
	}
}
