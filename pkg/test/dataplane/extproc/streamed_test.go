// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/google/go-cmp/cmp"
)

// streamedMode is what a GatewayClass with eppRequestBodyMode Streamed
// gets: request body STREAMED, response body NONE, trailers not sent.
func streamedMode() *extprocv3.ProcessingMode {
	return &extprocv3.ProcessingMode{
		RequestHeaderMode:  extprocv3.ProcessingMode_SEND,
		ResponseHeaderMode: extprocv3.ProcessingMode_SEND,
		RequestBodyMode:    extprocv3.ProcessingMode_STREAMED,
		ResponseBodyMode:   extprocv3.ProcessingMode_NONE,
	}
}

func streamedConfig(allow bool, timeout time.Duration) Config {
	cfg := testConfig(allow)
	cfg.ProcessingMode = streamedMode()
	cfg.SendBodyWithoutWaiting = true
	cfg.MessageTimeout = timeout
	return cfg
}

func headersResponse(pick string) *extprocsvc.ProcessingResponse {
	return &extprocsvc.ProcessingResponse{
		Response: &extprocsvc.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocsvc.HeadersResponse{
			Response: &extprocsvc.CommonResponse{
				HeaderMutation:  mutationSet("x-gateway-destination-endpoint", pick),
				ClearRouteCache: true,
			}}},
		DynamicMetadata: lbMetadata("x-gateway-destination-endpoint", pick),
	}
}

func bodyResponse(cr *extprocsvc.CommonResponse) *extprocsvc.ProcessingResponse {
	return &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_RequestBody{
		RequestBody: &extprocsvc.BodyResponse{Response: cr}}}
}

func responseHeadersResponse() *extprocsvc.ProcessingResponse {
	return &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocsvc.HeadersResponse{Response: &extprocsvc.CommonResponse{
			HeaderMutation: mutationSet("x-went-into-resp-headers", "true")}}}}
}

// lweppV160 answers as lwepp v1.6.0 does (GIE pkg/lwepp/handlers/server.go,
// conformance.md §5): headers with end_of_stream are answered at once;
// headers of a request with a body are deferred until the body's
// end_of_stream chunk, and then answered; every body chunk gets a
// BodyResponse with an empty CommonResponse (no mutation), sent right
// after the chunk arrives, so for a body of several chunks the first body
// response precedes the headers response.
func lweppV160(pick string) func(extprocsvc.ExternalProcessor_ProcessServer, *fakeProcessor) error {
	return func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		for {
			m, err := f.recv(s)
			if err != nil {
				return nil
			}
			var out []*extprocsvc.ProcessingResponse
			switch v := m.GetRequest().(type) {
			case *extprocsvc.ProcessingRequest_RequestHeaders:
				if v.RequestHeaders.GetEndOfStream() {
					out = append(out, headersResponse(pick))
				}
			case *extprocsvc.ProcessingRequest_RequestBody:
				if v.RequestBody.GetEndOfStream() {
					out = append(out, headersResponse(pick))
				}
				out = append(out, bodyResponse(&extprocsvc.CommonResponse{}))
			case *extprocsvc.ProcessingRequest_ResponseHeaders:
				out = append(out, responseHeadersResponse())
			case *extprocsvc.ProcessingRequest_ResponseBody:
				out = append(out, &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseBody{
					ResponseBody: &extprocsvc.BodyResponse{Response: &extprocsvc.CommonResponse{}}}})
			}
			for _, o := range out {
				if err := s.Send(o); err != nil {
					return nil
				}
			}
		}
	}
}

// deferringEPP waits for the body's end, then answers the headers and
// every chunk in order, replacing each chunk's body with mutate's result
// (nil mutation: unchanged). It keeps the header-before-body order.
func deferringEPP(pick string, mutate func(chunk []byte) *extprocsvc.BodyMutation) func(extprocsvc.ExternalProcessor_ProcessServer, *fakeProcessor) error {
	return func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		var chunks [][]byte
		for {
			m, err := f.recv(s)
			if err != nil {
				return nil
			}
			var out []*extprocsvc.ProcessingResponse
			switch v := m.GetRequest().(type) {
			case *extprocsvc.ProcessingRequest_RequestBody:
				chunks = append(chunks, v.RequestBody.GetBody())
				if v.RequestBody.GetEndOfStream() {
					out = append(out, headersResponse(pick))
					for _, c := range chunks {
						out = append(out, bodyResponse(&extprocsvc.CommonResponse{BodyMutation: mutate(c)}))
					}
				}
			case *extprocsvc.ProcessingRequest_ResponseHeaders:
				out = append(out, responseHeadersResponse())
			}
			for _, o := range out {
				if err := s.Send(o); err != nil {
					return nil
				}
			}
		}
	}
}

// kubernetes-sigs/gateway-api-inference-extension#3035: with the
// seed's FULL_DUPLEX_STREAMED mode, lwepp v1.6.0's
// empty body response is "spurious message: Normal body mutation response
// is received while body_mode_ is FULL_DUPLEX_STREAMED", and the POST fails
// with 500 (processor_state.cc, handleStreamedBodyCallback).
func TestLweppV160FullDuplexIsSpurious(t *testing.T) {
	_, dial := startProcessor(t, lweppV160("10.0.0.7:8000"))
	up := &fakeUpstream{respBody: "ok"}
	cfg := testConfig(false)
	resp, err := Process(context.Background(), cfg, dial, postRequest(`{"p":1}`), up.call)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 500 || !strings.Contains(resp.Details, "spurious_message") || up.calls() != 0 {
		t.Fatalf("got %d %q with %d upstream calls, want 500 spurious message and no upstream call", resp.Status, resp.Details, up.calls())
	}
	if cfg.Counters.SpuriousMessages.Load() != 1 {
		t.Errorf("spurious messages = %d, want 1", cfg.Counters.SpuriousMessages.Load())
	}
}

// The same lwepp with STREAMED and send_body_without_waiting: headers and
// the one body chunk go without waiting, lwepp answers the headers, then
// the chunk with no mutation (unchanged); the pick and the body reach the
// upstream, the response phase sends headers only.
func TestLweppV160StreamedPasses(t *testing.T) {
	f, dial := startProcessor(t, lweppV160("10.0.0.7:8000"))
	up := &fakeUpstream{respBody: "ok", served: "10.0.0.7:8000"}
	cfg := streamedConfig(false, 200*time.Millisecond) // Envoy's default timer
	resp, err := Process(context.Background(), cfg, dial, postRequest(`{"p":"x"}`), up.call)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); resp.Status != 200 || got != "ok" {
		t.Fatalf("response %d %q (%s), want 200 ok", resp.Status, got, resp.Details)
	}
	f.waitDone(t)
	want := []string{"request_headers", `request_body:{"p":"x"}|eos`, "response_headers"}
	if d := cmp.Diff(want, kinds(f.messages())); d != "" {
		t.Fatalf("messages (-want +got):\n%s", d)
	}
	pc := f.messages()[0].GetProtocolConfig()
	if pc.GetRequestBodyMode() != extprocv3.ProcessingMode_STREAMED || !pc.GetSendBodyWithoutWaitingForHeaderResponse() {
		t.Errorf("protocol_config = %v, want STREAMED with send_body_without_waiting_for_header_response", pc)
	}
	if up.body != `{"p":"x"}` || up.req.Headers.Get("X-Gateway-Destination-Endpoint") != "10.0.0.7:8000" {
		t.Errorf("upstream got body %q pick %q", up.body, up.req.Headers.Get("X-Gateway-Destination-Endpoint"))
	}
	if up.req.Headers.Get("Content-Length") != "" {
		t.Error("content-length must be removed in STREAMED mode (shouldRemoveContentLength)")
	}
	if resp.Headers.Get("X-Went-Into-Resp-Headers") != "true" {
		t.Errorf("response headers mutation missing: %v", resp.Headers)
	}
	if cfg.Counters.SpuriousMessages.Load() != 0 || cfg.Counters.MessageTimeouts.Load() != 0 {
		t.Errorf("spurious %d timeouts %d", cfg.Counters.SpuriousMessages.Load(), cfg.Counters.MessageTimeouts.Load())
	}
}

// A body of two chunks: lwepp answers the first chunk before the headers.
// Envoy accepts a body response only after the headers response
// (isValidBodyCallbackState): spurious, 500 when failures are not allowed;
// with failure_mode_allow the queued chunks go on unchanged and the
// request continues without the pick.
func TestLweppV160StreamedMultiChunkBodyFirstIsSpurious(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "FailClose", true: "FailOpen"}[allow], func(t *testing.T) {
			_, dial := startProcessor(t, lweppV160("10.0.0.7:8000"))
			up := &fakeUpstream{respBody: "ok"}
			cfg := streamedConfig(allow, time.Minute)
			req := postRequest("abc", "def")
			req.Body = &gatedChunks{chunks: []string{"abc", "def"}, gap: 50 * time.Millisecond}
			resp, err := Process(context.Background(), cfg, dial, req, up.call)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if cfg.Counters.SpuriousMessages.Load() != 1 {
				t.Fatalf("spurious messages = %d, want 1", cfg.Counters.SpuriousMessages.Load())
			}
			if !allow {
				if resp.Status != 500 || up.calls() != 0 {
					t.Fatalf("got %d with %d upstream calls, want 500 and none", resp.Status, up.calls())
				}
				return
			}
			if resp.Status != 200 || body != "ok" || up.body != "abcdef" || up.req.Headers.Get("X-Gateway-Destination-Endpoint") != "" {
				t.Fatalf("got %d %q, upstream body %q pick %q; want the request unchanged and unpicked",
					resp.Status, body, up.body, up.req.Headers.Get("X-Gateway-Destination-Endpoint"))
			}
		})
	}
}

// gatedChunks returns one chunk per Read, each after gap.
type gatedChunks struct {
	chunks []string
	gap    time.Duration
}

func (g *gatedChunks) Read(b []byte) (int, error) {
	if len(g.chunks) == 0 {
		return 0, io.EOF
	}
	time.Sleep(g.gap)
	n := copy(b, g.chunks[0])
	g.chunks = g.chunks[1:]
	return n, nil
}

// A processor that keeps the order gets every chunk, answers the headers
// at the end, and rewrites the chunks: the upstream gets the rewritten
// body, clear_body empties a chunk, no mutation keeps it.
func TestStreamedBodyMutations(t *testing.T) {
	f, dial := startProcessor(t, deferringEPP("10.0.0.9:8000", func(c []byte) *extprocsvc.BodyMutation {
		switch string(c) {
		case "abc":
			return &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_Body{Body: []byte("ABC")}}
		case "def":
			return &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_ClearBody{ClearBody: true}}
		}
		return nil
	}))
	up := &fakeUpstream{respBody: "ok"}
	cfg := streamedConfig(false, time.Minute)
	req := postRequest()
	req.Body = &gatedChunks{chunks: []string{"abc", "def", "ghi"}, gap: 20 * time.Millisecond}
	resp, err := Process(context.Background(), cfg, dial, req, up.call)
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp) != "ok" || up.body != "ABCghi" {
		t.Fatalf("status %d (%s), upstream body %q, want ABCghi", resp.Status, resp.Details, up.body)
	}
	want := []string{"request_headers", "request_body:abc", "request_body:def", "request_body:ghi|eos", "response_headers"}
	if d := cmp.Diff(want, kinds(f.messages())); d != "" {
		t.Fatalf("messages (-want +got):\n%s", d)
	}
}

// The decode timer starts afresh with each chunk sent: a client whose
// chunks come within message_timeout of each other passes even when the
// processor waits for the end, while one gap longer than message_timeout
// fires it (504, or the request continues unchanged with failure_mode_allow).
// With an EPP that answers at the body's end, message_timeout bounds the
// client's upload gaps too (ProcessorState::onStartProcessorCall).
func TestStreamedMessageTimer(t *testing.T) {
	// The stand-in hands a chunk on when the next read returns (it learns
	// that a chunk is the last only then), so with a gap g between reads
	// the sends are 2g, 3g, ... after the headers: with g 100 ms every
	// interval is at most 200 ms, a fifth of the 1 s timeout (room for a
	// loaded machine's scheduling), and the body takes 400 ms in all; with
	// g equal to the timeout the first interval is twice it.
	const timeout = time.Second
	run := func(t *testing.T, allow bool, gap time.Duration) (*Response, *fakeUpstream, Config) {
		_, dial := startProcessor(t, deferringEPP("10.0.0.9:8000", func([]byte) *extprocsvc.BodyMutation { return nil }))
		up := &fakeUpstream{respBody: "ok"}
		cfg := streamedConfig(allow, timeout)
		req := postRequest()
		req.Body = &gatedChunks{chunks: []string{"a", "b", "c", "d"}, gap: gap}
		resp, err := Process(context.Background(), cfg, dial, req, up.call)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		return resp, up, cfg
	}
	t.Run("gaps within the timeout", func(t *testing.T) {
		resp, up, cfg := run(t, false, 100*time.Millisecond)
		if resp.Status != 200 || up.body != "abcd" || cfg.Counters.MessageTimeouts.Load() != 0 {
			t.Fatalf("status %d (%s) body %q timeouts %d", resp.Status, resp.Details, up.body, cfg.Counters.MessageTimeouts.Load())
		}
	})
	t.Run("a gap over the timeout, FailClose", func(t *testing.T) {
		resp, up, cfg := run(t, false, timeout)
		if resp.Status != 504 || resp.Details != "ext_proc_error_per-message_timeout_exceeded" || up.calls() != 0 || cfg.Counters.MessageTimeouts.Load() != 1 {
			t.Fatalf("status %d (%s) calls %d timeouts %d", resp.Status, resp.Details, up.calls(), cfg.Counters.MessageTimeouts.Load())
		}
	})
	t.Run("a gap over the timeout, FailOpen", func(t *testing.T) {
		resp, up, cfg := run(t, true, timeout)
		if resp.Status != 200 || up.body != "abcd" || cfg.Counters.FailureModeAllowed.Load() != 1 {
			t.Fatalf("status %d (%s) body %q allowed %d", resp.Status, resp.Details, up.body, cfg.Counters.FailureModeAllowed.Load())
		}
	})
}

// The headers response stops the decode timer although the chunk's body
// response is still due (onFinishProcessorCall), so a processor that
// answers the headers and then hangs is not cut by message_timeout: the
// request waits until the stream's context ends, as in Envoy.
func TestStreamedTimerStopsAtHeadersResponse(t *testing.T) {
	_, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		for {
			m, err := f.recv(s)
			if err != nil {
				return nil
			}
			if m.GetRequestBody().GetEndOfStream() {
				if err := s.Send(headersResponse("10.0.0.9:8000")); err != nil {
					return nil
				}
			}
		}
	})
	cfg := streamedConfig(false, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	_, err := Process(ctx, cfg, dial, postRequest("abc"), (&fakeUpstream{}).call)
	if !errors.Is(err, context.DeadlineExceeded) || cfg.Counters.MessageTimeouts.Load() != 0 {
		t.Fatalf("err %v timeouts %d, want the context's end and no message timeout", err, cfg.Counters.MessageTimeouts.Load())
	}
}

// A streamed_response in STREAMED mode is spurious; a header mutation in a
// body response is refused (stricter than Envoy, which ignores it).
func TestStreamedBodyResponseChecks(t *testing.T) {
	for name, tc := range map[string]struct {
		cr       *extprocsvc.CommonResponse
		spurious bool
	}{
		"streamed_response": {cr: streamed([]byte("x"), true).GetResponse(), spurious: true},
		"header_mutation":   {cr: &extprocsvc.CommonResponse{HeaderMutation: mutationSet("x-a", "b")}},
	} {
		t.Run(name, func(t *testing.T) {
			_, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
				for {
					m, err := f.recv(s)
					if err != nil {
						return nil
					}
					if m.GetRequestBody().GetEndOfStream() {
						_ = s.Send(headersResponse("10.0.0.9:8000"))
						_ = s.Send(bodyResponse(tc.cr))
					}
				}
			})
			cfg := streamedConfig(false, time.Minute)
			up := &fakeUpstream{}
			resp, err := Process(context.Background(), cfg, dial, postRequest("abc"), up.call)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != 500 || up.calls() != 0 || (cfg.Counters.SpuriousMessages.Load() == 1) != tc.spurious {
				t.Fatalf("status %d (%s) calls %d spurious %d", resp.Status, resp.Details, up.calls(), cfg.Counters.SpuriousMessages.Load())
			}
		})
	}
}

// Request trailers in STREAMED mode (trailer mode SKIP): the last chunk
// goes without end_of_stream, and the trailers reach the upstream once
// that chunk is answered.
func TestStreamedTrailersFollowTheBody(t *testing.T) {
	f, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		for {
			m, err := f.recv(s)
			if err != nil {
				return nil
			}
			switch m.GetRequest().(type) {
			case *extprocsvc.ProcessingRequest_RequestHeaders:
				_ = s.Send(headersResponse("10.0.0.9:8000")) // instant response
			case *extprocsvc.ProcessingRequest_RequestBody:
				_ = s.Send(bodyResponse(&extprocsvc.CommonResponse{}))
			case *extprocsvc.ProcessingRequest_ResponseHeaders:
				_ = s.Send(responseHeadersResponse())
			}
		}
	})
	up := &fakeUpstream{respBody: "ok"}
	req := postRequest("abc")
	req.Trailers = http.Header{"X-Checksum": {"1"}}
	resp, err := Process(context.Background(), streamedConfig(false, time.Minute), dial, req, up.call)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	want := []string{"request_headers", "request_body:abc", "response_headers"}
	if d := cmp.Diff(want, kinds(f.messages())); d != "" {
		t.Fatalf("messages (-want +got):\n%s", d)
	}
	if up.body != "abc" || up.trailers.Get("X-Checksum") != "1" {
		t.Fatalf("upstream body %q trailers %v", up.body, up.trailers)
	}
}
