// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeProcessor is an in-process ExternalProcessor on 127.0.0.1 whose
// behaviour each test supplies; it records every message it receives.
type fakeProcessor struct {
	extprocsvc.UnimplementedExternalProcessorServer
	handle func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error

	mu       sync.Mutex
	received []*extprocsvc.ProcessingRequest
	done     chan struct{} // closed when the first stream's handler returns
	once     sync.Once
	first    chan struct{} // closed when the first message arrives
	fonce    sync.Once
}

func (f *fakeProcessor) Process(s extprocsvc.ExternalProcessor_ProcessServer) error {
	defer f.once.Do(func() { close(f.done) })
	return f.handle(s, f)
}

func (f *fakeProcessor) recv(s extprocsvc.ExternalProcessor_ProcessServer) (*extprocsvc.ProcessingRequest, error) {
	m, err := s.Recv()
	if err == nil {
		f.mu.Lock()
		f.received = append(f.received, m)
		f.mu.Unlock()
		f.fonce.Do(func() { close(f.first) })
	}
	return m, err
}

func (f *fakeProcessor) messages() []*extprocsvc.ProcessingRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*extprocsvc.ProcessingRequest(nil), f.received...)
}

// waitDone waits for the processor's stream handler to return (the filter
// closed the stream); the bound only turns a hang into a failure.
func (f *fakeProcessor) waitDone(t *testing.T) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("processor stream never ended")
	}
}

func startProcessor(t *testing.T, handle func(extprocsvc.ExternalProcessor_ProcessServer, *fakeProcessor) error) (*fakeProcessor, Dialer) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeProcessor{handle: handle, done: make(chan struct{}), first: make(chan struct{})}
	srv := grpc.NewServer()
	extprocsvc.RegisterExternalProcessorServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f, dialTo(t, lis.Addr().String())
}

func dialTo(t *testing.T, addr string) Dialer {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return func(context.Context, string, string) (grpc.ClientConnInterface, error) { return conn, nil }
}

// eppLike answers as a GIE endpoint picker does: the pick as a request
// header and as envoy.lb metadata; bodies echoed back transformed by xf.
func eppLike(pick string, xf func([]byte) []byte) func(extprocsvc.ExternalProcessor_ProcessServer, *fakeProcessor) error {
	return func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
		for {
			m, err := f.recv(s)
			if err != nil {
				return nil
			}
			var out *extprocsvc.ProcessingResponse
			switch v := m.GetRequest().(type) {
			case *extprocsvc.ProcessingRequest_RequestHeaders:
				out = &extprocsvc.ProcessingResponse{
					Response: &extprocsvc.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocsvc.HeadersResponse{
						Response: &extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{
							SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{
								Key: "x-gateway-destination-endpoint", RawValue: []byte(pick)}}},
						}},
					}},
					DynamicMetadata: lbMetadata("x-gateway-destination-endpoint", pick),
				}
			case *extprocsvc.ProcessingRequest_RequestBody:
				out = &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_RequestBody{
					RequestBody: streamed(xf(v.RequestBody.GetBody()), v.RequestBody.GetEndOfStream())}}
			case *extprocsvc.ProcessingRequest_RequestTrailers:
				out = &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_RequestTrailers{
					RequestTrailers: &extprocsvc.TrailersResponse{HeaderMutation: &extprocsvc.HeaderMutation{
						SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-trailer-seen", RawValue: []byte("yes")}}},
					}}}}
			case *extprocsvc.ProcessingRequest_ResponseHeaders:
				out = &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseHeaders{
					ResponseHeaders: &extprocsvc.HeadersResponse{Response: &extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{
						SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-went-through-epp", RawValue: []byte("true")}}},
					}}}}}
			case *extprocsvc.ProcessingRequest_ResponseBody:
				out = &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseBody{
					ResponseBody: streamed(v.ResponseBody.GetBody(), v.ResponseBody.GetEndOfStream())}}
			case *extprocsvc.ProcessingRequest_ResponseTrailers:
				out = &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseTrailers{
					ResponseTrailers: &extprocsvc.TrailersResponse{}}}
			}
			if err := s.Send(out); err != nil {
				return nil
			}
		}
	}
}

func streamed(b []byte, eos bool) *extprocsvc.BodyResponse {
	return &extprocsvc.BodyResponse{Response: &extprocsvc.CommonResponse{BodyMutation: &extprocsvc.BodyMutation{
		Mutation: &extprocsvc.BodyMutation_StreamedResponse{StreamedResponse: &extprocsvc.StreamedBodyResponse{Body: b, EndOfStream: eos}}}}}
}

func lbMetadata(key, value string) *structpb.Struct {
	inner, _ := structpb.NewStruct(map[string]any{key: value})
	return &structpb.Struct{Fields: map[string]*structpb.Value{"envoy.lb": structpb.NewStructValue(inner)}}
}

// seedMode is the processing mode of the seed's ExtProcPerRoute.
func seedMode() *extprocv3.ProcessingMode {
	return &extprocv3.ProcessingMode{
		RequestHeaderMode:   extprocv3.ProcessingMode_SEND,
		ResponseHeaderMode:  extprocv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED,
		ResponseBodyMode:    extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED,
		RequestTrailerMode:  extprocv3.ProcessingMode_SEND,
		ResponseTrailerMode: extprocv3.ProcessingMode_SEND,
	}
}

func lbOptions() *extprocv3.MetadataOptions {
	ns := &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{"envoy.lb"}}
	return &extprocv3.MetadataOptions{ForwardingNamespaces: ns, ReceivingNamespaces: ns}
}

func testConfig(allow bool) Config {
	return Config{
		GrpcCluster: "outbound|9002||epp.ns.svc.cluster.local", ProcessingMode: seedMode(),
		FailureModeAllow: allow, MetadataOptions: lbOptions(), StatusOnError: 500,
		MessageTimeout: time.Minute, Counters: &Counters{},
	}
}

// chunkReader returns its chunks one Read at a time, as a client sending
// the body in pieces.
type chunkReader struct{ chunks []string }

func (c *chunkReader) Read(b []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(b, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// fakeUpstream records what reached it and answers with status, body and
// the served endpoint.
type fakeUpstream struct {
	mu       sync.Mutex
	called   int
	req      *Request
	body     string
	trailers http.Header
	md       map[string]*structpb.Struct

	status      int
	respBody    string
	respHeaders http.Header // added to the response's headers
	served      string
}

func (u *fakeUpstream) call(_ context.Context, req *Request, md map[string]*structpb.Struct) (*Response, map[string]*structpb.Struct, error) {
	var body string
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, nil, err
		}
		body = string(b)
	}
	u.mu.Lock()
	u.called++
	u.req, u.body, u.md, u.trailers = req, body, md, req.Trailers
	u.mu.Unlock()
	st := u.status
	if st == 0 {
		st = 200
	}
	resp := &Response{Status: st, Headers: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader(u.respBody))}
	for k, v := range u.respHeaders {
		resp.Headers[k] = v
	}
	if u.respBody == "" {
		resp.Body = http.NoBody // headers end the response, as a codec would report
	}
	var served map[string]*structpb.Struct
	if u.served != "" {
		served = map[string]*structpb.Struct{"envoy.lb": lbMetadata("x-gateway-destination-endpoint-served", u.served).Fields["envoy.lb"].GetStructValue()}
	}
	return resp, served, nil
}

func (u *fakeUpstream) calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.called
}

func readAll(t *testing.T, r *Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("reading response body: %v", err)
	}
	_ = r.Body.Close()
	return string(b)
}

func kinds(ms []*extprocsvc.ProcessingRequest) []string {
	var out []string
	for _, m := range ms {
		switch v := m.GetRequest().(type) {
		case *extprocsvc.ProcessingRequest_RequestHeaders:
			out = append(out, "request_headers")
		case *extprocsvc.ProcessingRequest_RequestBody:
			out = append(out, "request_body:"+string(v.RequestBody.GetBody())+eos(v.RequestBody.GetEndOfStream()))
		case *extprocsvc.ProcessingRequest_RequestTrailers:
			out = append(out, "request_trailers")
		case *extprocsvc.ProcessingRequest_ResponseHeaders:
			out = append(out, "response_headers")
		case *extprocsvc.ProcessingRequest_ResponseBody:
			out = append(out, "response_body:"+string(v.ResponseBody.GetBody())+eos(v.ResponseBody.GetEndOfStream()))
		case *extprocsvc.ProcessingRequest_ResponseTrailers:
			out = append(out, "response_trailers")
		}
	}
	return out
}

func eos(b bool) string {
	if b {
		return "|eos"
	}
	return ""
}

func headerValues(hm *corev3.HeaderMap) map[string]string {
	out := map[string]string{}
	for _, h := range hm.GetHeaders() {
		out[h.GetKey()] = string(h.GetRawValue())
	}
	return out
}

type typeStatus = typev3.HttpStatus

func mutationSet(k, v string) *extprocsvc.HeaderMutation {
	return &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}}}}
}
