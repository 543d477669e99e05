// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func getRequest() *Request {
	return &Request{Method: "GET", Path: "/v1/models", Authority: "llm.example.com", Scheme: "http",
		Headers: http.Header{"X-Test-Request-Id": {"r1"}}}
}

func postRequest(chunks ...string) *Request {
	return &Request{Method: "POST", Path: "/v1/completions", Authority: "llm.example.com", Scheme: "http",
		Headers: http.Header{"Content-Length": {"9"}, "Content-Type": {"application/json"}},
		Body:    &chunkReader{chunks: chunks}}
}

// GET through the seed's processing mode: the pick reaches the upstream as
// header and metadata, the served endpoint goes back to the processor, and
// the response body streams through it.
func TestProcessGETSeedMode(t *testing.T) {
	f, dial := startProcessor(t, eppLike("10.0.0.7:8000", func(b []byte) []byte { return b }))
	up := &fakeUpstream{respBody: "hello", served: "10.0.0.7:8000"}
	cfg := testConfig(false)
	resp, err := Process(context.Background(), cfg, dial, getRequest(), up.call)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "hello" || resp.Status != 200 {
		t.Fatalf("response = %d %q, want 200 hello", resp.Status, got)
	}
	if got := resp.Headers.Get("X-Went-Through-Epp"); got != "true" {
		t.Errorf("response header mutation missing: %v", resp.Headers)
	}
	if resp.Headers.Get("Content-Length") != "" {
		t.Errorf("content-length should be dropped in FULL_DUPLEX_STREAMED mode")
	}
	f.waitDone(t)

	if got := up.req.Headers.Get("X-Gateway-Destination-Endpoint"); got != "10.0.0.7:8000" {
		t.Errorf("upstream header = %q", got)
	}
	if got := up.md["envoy.lb"].GetFields()["x-gateway-destination-endpoint"].GetStringValue(); got != "10.0.0.7:8000" {
		t.Errorf("upstream metadata = %v", up.md)
	}
	ms := f.messages()
	if diff := cmp.Diff([]string{"request_headers", "response_headers", "response_body:hello|eos"}, kinds(ms)); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	rh := ms[0].GetRequestHeaders()
	if !rh.GetEndOfStream() {
		t.Error("GET headers must carry end_of_stream")
	}
	want := map[string]string{":method": "GET", ":path": "/v1/models", ":authority": "llm.example.com", ":scheme": "http", "x-test-request-id": "r1"}
	if diff := cmp.Diff(want, headerValues(rh.GetHeaders())); diff != "" {
		t.Errorf("request headers (-want +got):\n%s", diff)
	}
	for _, h := range rh.GetHeaders().GetHeaders() {
		if h.GetValue() != "" {
			t.Errorf("header %s sent in value, Envoy sends raw_value", h.GetKey())
		}
	}
	pc := ms[0].GetProtocolConfig()
	if pc.GetRequestBodyMode() != extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED || ms[1].GetProtocolConfig() != nil {
		t.Errorf("protocol_config must be on the first message only: %v / %v", pc, ms[1].GetProtocolConfig())
	}
	served := ms[1].GetMetadataContext().GetFilterMetadata()["envoy.lb"].GetFields()["x-gateway-destination-endpoint-served"].GetStringValue()
	if served != "10.0.0.7:8000" {
		t.Errorf("response headers metadata_context = %v, want the served endpoint", ms[1].GetMetadataContext())
	}
	if got := ms[1].GetResponseHeaders().GetHeaders(); headerValues(got)[":status"] != "200" {
		t.Errorf("response headers = %v", got)
	}
}

// Request headers SEND, response SKIP, bodies NONE: one message only, and
// the stream closes once the headers response is in.
func TestProcessHeadersOnlySkipResponse(t *testing.T) {
	f, dial := startProcessor(t, eppLike("10.0.0.8:8000", nil))
	cfg := testConfig(false)
	cfg.ProcessingMode = &extprocv3.ProcessingMode{RequestHeaderMode: extprocv3.ProcessingMode_SEND, ResponseHeaderMode: extprocv3.ProcessingMode_SKIP}
	up := &fakeUpstream{respBody: "ok"}
	resp, err := Process(context.Background(), cfg, dial, getRequest(), up.call)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "ok" {
		t.Fatalf("body %q", got)
	}
	f.waitDone(t)
	if diff := cmp.Diff([]string{"request_headers"}, kinds(f.messages())); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	if up.req.Headers.Get("X-Gateway-Destination-Endpoint") != "10.0.0.8:8000" {
		t.Errorf("mutation lost: %v", up.req.Headers)
	}
}

// Request headers SKIP with a GET and response headers SEND: the upstream
// is called at once and only the response phase reaches the processor.
func TestProcessRequestHeadersSkip(t *testing.T) {
	f, dial := startProcessor(t, eppLike("unused", nil))
	cfg := testConfig(false)
	cfg.ProcessingMode = &extprocv3.ProcessingMode{RequestHeaderMode: extprocv3.ProcessingMode_SKIP, ResponseHeaderMode: extprocv3.ProcessingMode_SEND}
	up := &fakeUpstream{respBody: "ok"}
	resp, err := Process(context.Background(), cfg, dial, getRequest(), up.call)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	f.waitDone(t)
	if diff := cmp.Diff([]string{"response_headers"}, kinds(f.messages())); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	if resp.Headers.Get("X-Went-Through-Epp") != "true" {
		t.Errorf("response mutation missing")
	}
}

// POST in full duplex: chunks go out as read, the last with end_of_stream;
// the upstream gets what the processor streams back.
func TestProcessPOSTFullDuplex(t *testing.T) {
	f, dial := startProcessor(t, eppLike("10.0.0.9:8000", bytes.ToUpper))
	up := &fakeUpstream{respBody: "done"}
	resp, err := Process(context.Background(), testConfig(false), dial, postRequest("abc", "def", "ghi"), up.call)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "done" {
		t.Fatalf("body %q", got)
	}
	f.waitDone(t)
	want := []string{"request_headers", "request_body:abc", "request_body:def", "request_body:ghi|eos", "response_headers", "response_body:done|eos"}
	if diff := cmp.Diff(want, kinds(f.messages())); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	if f.messages()[0].GetRequestHeaders().GetEndOfStream() {
		t.Error("headers of a request with a body must not end the stream")
	}
	if up.body != "ABCDEFGHI" {
		t.Errorf("upstream body = %q, want the processor's", up.body)
	}
	if up.req.Headers.Get("Content-Length") != "" {
		t.Error("content-length must be removed upstream in FULL_DUPLEX_STREAMED mode")
	}
}

// With trailers, the last chunk has no end_of_stream and a trailers
// message ends the body; the trailer mutation reaches the upstream.
func TestProcessPOSTTrailers(t *testing.T) {
	f, dial := startProcessor(t, eppLike("10.0.0.9:8000", func(b []byte) []byte { return b }))
	req := postRequest("abc")
	req.Trailers = http.Header{"X-Checksum": {"1"}}
	up := &fakeUpstream{}
	resp, err := Process(context.Background(), testConfig(false), dial, req, up.call)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	f.waitDone(t)
	want := []string{"request_headers", "request_body:abc", "request_trailers", "response_headers"}
	if diff := cmp.Diff(want, kinds(f.messages())); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	if up.trailers.Get("X-Trailer-Seen") != "yes" || up.trailers.Get("X-Checksum") != "1" {
		t.Errorf("upstream trailers = %v", up.trailers)
	}
}

func TestProcessImmediateResponse(t *testing.T) {
	f, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		if _, err := f.recv(s); err != nil {
			return err
		}
		return s.Send(&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ImmediateResponse{
			ImmediateResponse: &extprocsvc.ImmediateResponse{
				Status:  &typeStatus{Code: 429},
				Headers: mutationSet("retry-after", "1"),
				Body:    []byte("shed"), Details: "load shed",
			}}})
	})
	up := &fakeUpstream{}
	cfg := testConfig(false)
	resp, err := Process(context.Background(), cfg, dial, postRequest("abc"), up.call)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 429 || readAll(t, resp) != "shed" || resp.Headers.Get("Retry-After") != "1" || resp.Details != "load_shed" {
		t.Fatalf("response = %+v", resp)
	}
	f.waitDone(t)
	if up.calls() != 0 {
		t.Error("upstream called after an immediate response")
	}
	if cfg.Counters.ImmediateResponses.Load() != 1 {
		t.Error("immediate response not counted")
	}
}

// An immediate response to a gRPC request is sent in gRPC form, as
// Envoy's prepareLocalReply makes it: 200, the processor's grpc_status
// when it gives one (else httpToGrpcStatus of the HTTP code), the body as
// a percent-encoded grpc-message, and no body.
func TestProcessImmediateResponseToGRPCRequest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		grpcStatus *extprocsvc.GrpcStatus
		want       string
	}{
		{"processor's grpc_status", &extprocsvc.GrpcStatus{Status: 8}, "8"},
		{"from the HTTP status", nil, "14"}, // 429 -> UNAVAILABLE
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
				if _, err := f.recv(s); err != nil {
					return err
				}
				return s.Send(&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ImmediateResponse{
					ImmediateResponse: &extprocsvc.ImmediateResponse{
						Status: &typeStatus{Code: 429}, GrpcStatus: tc.grpcStatus,
						Body: []byte("shed 100%\n"),
					}}})
			})
			req := postRequest("abc")
			req.Headers.Set("Content-Type", "application/grpc+proto")
			up := &fakeUpstream{}
			resp, err := Process(context.Background(), testConfig(false), dial, req, up.call)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{resp.Headers.Get("grpc-status"), resp.Headers.Get("grpc-message"), resp.Headers.Get("content-type")}
			want := []string{tc.want, "shed 100%25%0A", "application/grpc"}
			if resp.Status != 200 || !cmp.Equal(got, want) || readAll(t, resp) != "" || resp.Headers.Get("content-length") != "" {
				t.Fatalf("response %d %v %v; want 200 %v, no body, no content-length", resp.Status, got, resp.Headers, want)
			}
		})
	}
}

// failing answers the first message with a gRPC error.
func failing(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
	if _, err := f.recv(s); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "epp overloaded")
}

func downDialer(t *testing.T) Dialer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing listens there any more
	return dialTo(t, addr)
}

func TestProcessFailureMode(t *testing.T) {
	refused := func(context.Context, string, string) (grpc.ClientConnInterface, error) {
		return nil, status.Error(codes.Unavailable, "no healthy upstream")
	}
	for _, tc := range []struct {
		name       string
		dial       func(t *testing.T) Dialer
		allow      bool
		req        func() *Request
		wantStatus int // 0: the upstream answered
		wantDetail string
	}{
		{"server error, allowed", func(t *testing.T) Dialer { _, d := startProcessor(t, failing); return d }, true, getRequest, 0, ""},
		{"server error, not allowed", func(t *testing.T) Dialer { _, d := startProcessor(t, failing); return d }, false, getRequest, 500, "ext_proc_error_gRPC_error_14{epp_overloaded}"},
		{"server down, allowed", downDialer, true, getRequest, 0, ""},
		{"server down, not allowed", downDialer, false, getRequest, 500, "ext_proc_error_gRPC_error_14"},
		{"dial fails, allowed, body", func(*testing.T) Dialer { return refused }, true, func() *Request { return postRequest("abc") }, 0, ""},
		{"dial fails, not allowed", func(*testing.T) Dialer { return refused }, false, getRequest, 500, "ext_proc_error_gRPC_error_14{no_healthy_upstream}"},
		// Envoy stops honouring failure_mode_allow once a FULL_DUPLEX body reached the filter.
		{"server error after body, allowed", func(t *testing.T) Dialer { _, d := startProcessor(t, failing); return d }, true, func() *Request { return postRequest("abc") }, 500, "ext_proc_error_gRPC_error_14{epp_overloaded}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(tc.allow)
			up := &fakeUpstream{respBody: "ok"}
			resp, err := Process(context.Background(), cfg, tc.dial(t), tc.req(), up.call)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if tc.wantStatus == 0 {
				if resp.Status != 200 || body != "ok" || up.calls() != 1 {
					t.Fatalf("want the upstream's answer, got %d %q (calls %d)", resp.Status, body, up.calls())
				}
				if up.req.Headers.Get("X-Gateway-Destination-Endpoint") != "" {
					t.Error("request must continue unmodified")
				}
				if cfg.Counters.FailureModeAllowed.Load() != 1 {
					t.Errorf("FailureModeAllowed = %d", cfg.Counters.FailureModeAllowed.Load())
				}
				return
			}
			if resp.Status != tc.wantStatus || !strings.HasPrefix(resp.Details, tc.wantDetail) || up.calls() != 0 {
				t.Fatalf("got %d %q (calls %d), want %d %q", resp.Status, resp.Details, up.calls(), tc.wantStatus, tc.wantDetail)
			}
			if cfg.Counters.LocalReplies.Load() != 1 || cfg.Counters.FailureModeAllowed.Load() != 0 {
				t.Errorf("counters: local %d allowed %d", cfg.Counters.LocalReplies.Load(), cfg.Counters.FailureModeAllowed.Load())
			}
		})
	}
}

// A processor that closes the stream with OK ends processing; the request
// continues unmodified even without failure_mode_allow.
func TestProcessCleanCloseContinues(t *testing.T) {
	_, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		_, err := f.recv(s)
		return err
	})
	up := &fakeUpstream{respBody: "ok"}
	cfg := testConfig(false)
	resp, err := Process(context.Background(), cfg, dial, getRequest(), up.call)
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp) != "ok" || up.calls() != 1 || cfg.Counters.StreamsFailed.Load() != 0 {
		t.Fatalf("want the upstream's answer; calls %d failed %d", up.calls(), cfg.Counters.StreamsFailed.Load())
	}
}

// A response that does not match what was sent is spurious: 500 when
// failures are not allowed.
func TestProcessSpuriousMessage(t *testing.T) {
	_, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		if _, err := f.recv(s); err != nil {
			return err
		}
		if err := s.Send(&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{}}}); err != nil {
			return err
		}
		_, err := f.recv(s)
		return err
	})
	cfg := testConfig(false)
	resp, err := Process(context.Background(), cfg, dial, getRequest(), (&fakeUpstream{}).call)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 500 || cfg.Counters.SpuriousMessages.Load() != 1 {
		t.Fatalf("status %d spurious %d", resp.Status, cfg.Counters.SpuriousMessages.Load())
	}
}

// A hung processor (never answers) holds the request until ctx ends: no
// per-message timeout in FULL_DUPLEX_STREAMED mode.
func TestProcessHungProcessorEndsWithContext(t *testing.T) {
	f, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		if _, err := f.recv(s); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up := &fakeUpstream{}
	errc := make(chan error, 1)
	go func() {
		_, err := Process(ctx, testConfig(true), dial, getRequest(), up.call)
		errc <- err
	}()
	<-f.first // the processor has the headers and will never answer
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	f.waitDone(t)
	if up.calls() != 0 {
		t.Error("upstream called while the processor was hung")
	}
}

// The request's deadline (the route's max_stream_duration) does not travel
// to the processor: Envoy's ext_proc stream has no deadline while
// grpc_service.timeout is unset, as pilot-discovery leaves it. With a
// grpc-timeout on the stream, a hung processor's side could end the stream
// first (its timer fires a little before ours under load), and a
// failure_mode_allow request would continue upstream instead of ending with
// the request's own 504. When the request's context ends, the stream ends
// too.
func TestProcessStreamCarriesNoDeadline(t *testing.T) {
	hasDeadline := make(chan bool, 1)
	f, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		_, ok := s.Context().Deadline()
		hasDeadline <- ok
		if _, err := f.recv(s); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	})
	// Far enough away that only the test's cancel ends the request.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	up := &fakeUpstream{}
	errc := make(chan error, 1)
	cfg := testConfig(true)
	go func() {
		_, err := Process(ctx, cfg, dial, getRequest(), up.call)
		errc <- err
	}()
	<-f.first
	if <-hasDeadline {
		t.Error("the processor's stream has a deadline: the request's deadline was sent as grpc-timeout")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	f.waitDone(t) // the request's end reached the processor
	if up.calls() != 0 {
		t.Error("upstream called while the processor was hung")
	}
	if n := cfg.Counters.FailureModeAllowed.Load(); n != 0 {
		t.Errorf("%d failure_mode_allow continuations after the request ended", n)
	}
}

// echoAll answers each headers message by setting every header it received
// back (as the v1.0.0 EPP does), so content-length comes back too, and
// streams bodies back through xf.
func echoAll(pick string, xf func([]byte) []byte) func(extprocsvc.ExternalProcessor_ProcessServer, *fakeProcessor) error {
	echo := func(h *extprocsvc.HttpHeaders) *extprocsvc.HeadersResponse {
		var set []*corev3.HeaderValueOption
		for _, hv := range h.GetHeaders().GetHeaders() {
			if !strings.HasPrefix(hv.GetKey(), ":") {
				set = append(set, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: hv.GetKey(), RawValue: hv.GetRawValue()}})
			}
		}
		return &extprocsvc.HeadersResponse{Response: &extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{SetHeaders: set}}}
	}
	return func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		for {
			m, err := f.recv(s)
			if err != nil {
				return nil
			}
			out := &extprocsvc.ProcessingResponse{}
			switch v := m.GetRequest().(type) {
			case *extprocsvc.ProcessingRequest_RequestHeaders:
				out.Response = &extprocsvc.ProcessingResponse_RequestHeaders{RequestHeaders: echo(v.RequestHeaders)}
				out.DynamicMetadata = lbMetadata("x-gateway-destination-endpoint", pick)
			case *extprocsvc.ProcessingRequest_RequestBody:
				out.Response = &extprocsvc.ProcessingResponse_RequestBody{RequestBody: streamed(xf(v.RequestBody.GetBody()), v.RequestBody.GetEndOfStream())}
			case *extprocsvc.ProcessingRequest_ResponseHeaders:
				out.Response = &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: echo(v.ResponseHeaders)}
			case *extprocsvc.ProcessingRequest_ResponseBody:
				out.Response = &extprocsvc.ProcessingResponse_ResponseBody{ResponseBody: streamed(xf(v.ResponseBody.GetBody()), v.ResponseBody.GetEndOfStream())}
			default:
				continue
			}
			if err := s.Send(out); err != nil {
				return nil
			}
		}
	}
}

// A processor that echoes content-length in its header mutations while it
// changes the body's length must not get the stale length through in
// FULL_DUPLEX_STREAMED mode, in either direction (Envoy removes it after
// applying the mutation).
func TestProcessContentLengthAfterMutation(t *testing.T) {
	grow := func(b []byte) []byte {
		if len(b) == 0 {
			return b
		}
		return append(b, '!')
	}
	_, dial := startProcessor(t, echoAll("10.0.0.9:8000", grow))
	up := &fakeUpstream{respBody: "done", respHeaders: http.Header{"Content-Length": {"4"}}}
	resp, err := Process(context.Background(), testConfig(false), dial, postRequest("abc", "def", "ghi"), up.call)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); !strings.HasPrefix(got, "done") || len(got) <= 4 {
		t.Fatalf("body %q, want the processor's longer body", got)
	}
	if cl := up.req.Headers.Get("Content-Length"); cl != "" {
		t.Errorf("upstream request content-length = %q after the processor echoed it; want none", cl)
	}
	if cl := resp.Headers.Get("Content-Length"); cl != "" {
		t.Errorf("response content-length = %q after the processor echoed it; want none", cl)
	}
}

// gatedBody is a request body whose bytes reach the filter only once open
// is closed: the client sent its headers and holds the body back.
type gatedBody struct {
	open <-chan struct{}
	r    io.Reader
}

func (g *gatedBody) Read(b []byte) (int, error) {
	<-g.open
	return g.r.Read(b)
}

// Envoy's Filter::failureModeAllow honours failure_mode_allow in
// FULL_DUPLEX_STREAMED mode until the filter's onData has seen a body
// (ProcessorState::bodyReceived, set at the top of Filter::onData): a
// processor error that arrives while the body is still held by the client
// continues the request unmodified, and the body then flows upstream. The
// case "server error after body" of TestProcessFailureMode is the other
// side: once a chunk reached the filter, the same error is a 500.
func TestProcessFailureBeforeBodyFailsOpen(t *testing.T) {
	_, dial := startProcessor(t, failing)
	cfg := testConfig(true)
	open := make(chan struct{})
	req := postRequest()
	req.Body = &gatedBody{open: open, r: strings.NewReader(`{"a":"b"}`)}
	up := &fakeUpstream{respBody: "ok"}
	go func() {
		// Release the body only after the failure was allowed (bounded).
		defer close(open)
		for i := 0; i < 500 && cfg.Counters.FailureModeAllowed.Load() == 0; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	resp, err := Process(context.Background(), cfg, dial, req, up.call)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.Status != 200 || body != "ok" {
		t.Fatalf("got %d %q (%s), want the upstream's 200: an error before any body fails open", resp.Status, body, resp.Details)
	}
	if n := cfg.Counters.FailureModeAllowed.Load(); n != 1 {
		t.Errorf("FailureModeAllowed = %d, want 1", n)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.body != `{"a":"b"}` {
		t.Errorf("upstream body %q: the held-back body must still reach the upstream", up.body)
	}
}
