// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package eppproxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeEPP picks picks[x-test-request-id] and otherwise follows mode.
type fakeEPP struct {
	extprocsvc.UnimplementedExternalProcessorServer
	picks map[string]string
	mode  string // "", "error", "immediate", "close"
}

func (e *fakeEPP) Process(s extprocsvc.ExternalProcessor_ProcessServer) error {
	for {
		m, err := s.Recv()
		if err != nil {
			return nil
		}
		var out *extprocsvc.ProcessingResponse
		switch v := m.GetRequest().(type) {
		case *extprocsvc.ProcessingRequest_RequestHeaders:
			switch e.mode {
			case "error":
				return status.Error(codes.ResourceExhausted, "shed")
			case "close":
				return nil
			case "immediate":
				return s.Send(&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ImmediateResponse{
					ImmediateResponse: &extprocsvc.ImmediateResponse{Status: &typev3.HttpStatus{Code: 503}, Details: "no_ready_endpoints"}}})
			}
			var id string
			for _, h := range v.RequestHeaders.GetHeaders().GetHeaders() {
				if h.GetKey() == "x-test-request-id" {
					id = string(h.GetRawValue())
				}
			}
			pick := e.picks[id]
			inner, _ := structpb.NewStruct(map[string]any{"x-gateway-destination-endpoint": pick})
			out = &extprocsvc.ProcessingResponse{
				Response: &extprocsvc.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocsvc.HeadersResponse{
					Response: &extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
						{Header: &corev3.HeaderValue{Key: "x-gateway-destination-endpoint", RawValue: []byte(pick)}}}}}}},
				DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{"envoy.lb": structpb.NewStructValue(inner)}},
			}
		case *extprocsvc.ProcessingRequest_ResponseHeaders:
			out = &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{}}}
		case *extprocsvc.ProcessingRequest_ResponseBody:
			out = &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseBody{ResponseBody: &extprocsvc.BodyResponse{
				Response: &extprocsvc.CommonResponse{BodyMutation: &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_StreamedResponse{
					StreamedResponse: &extprocsvc.StreamedBodyResponse{Body: v.ResponseBody.GetBody(), EndOfStream: v.ResponseBody.GetEndOfStream()}}}}}}}
		default:
			continue
		}
		if err := s.Send(out); err != nil {
			return nil
		}
	}
}

func startEPP(t *testing.T, e *fakeEPP, cert *SelfSigned) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cert.ServerTLS())))
	}
	srv := grpc.NewServer(opts...)
	extprocsvc.RegisterExternalProcessorServer(srv, e)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func startProxy(t *testing.T, cfg Config) *Proxy {
	t.Helper()
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// dataPlane sends requests through the proxy with the test data plane's
// ext_proc filter in the seed's processing mode.
type dataPlane struct {
	dial extproc.Dialer
}

func newDataPlane(t *testing.T, addr string, tc *tls.Config) *dataPlane {
	t.Helper()
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &dataPlane{dial: func(context.Context, string, string) (grpc.ClientConnInterface, error) { return conn, nil }}
}

func (d *dataPlane) get(t *testing.T, id string) *extproc.Response {
	t.Helper()
	ns := &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{NamespaceLB}}
	cfg := extproc.Config{
		GrpcCluster: "outbound|9002||epp", Counters: &extproc.Counters{}, StatusOnError: 500,
		MetadataOptions: &extprocv3.MetadataOptions{ForwardingNamespaces: ns, ReceivingNamespaces: ns},
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode: extprocv3.ProcessingMode_SEND, ResponseHeaderMode: extprocv3.ProcessingMode_SEND,
			RequestBodyMode: extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED, ResponseBodyMode: extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED,
			RequestTrailerMode: extprocv3.ProcessingMode_SEND, ResponseTrailerMode: extprocv3.ProcessingMode_SEND,
		},
	}
	req := &extproc.Request{Method: "GET", Path: "/v1/models", Authority: "llm.example.com", Scheme: "http",
		Headers: http.Header{"X-Test-Request-Id": {id}}}
	up := func(_ context.Context, _ *extproc.Request, md map[string]*structpb.Struct) (*extproc.Response, map[string]*structpb.Struct, error) {
		pick := md[NamespaceLB].GetFields()[KeyDestination].GetStringValue()
		served, _ := structpb.NewStruct(map[string]any{KeyServed: pick})
		return &extproc.Response{Status: 200, Headers: http.Header{}, Body: io.NopCloser(strings.NewReader("from " + pick))},
			map[string]*structpb.Struct{NamespaceLB: served}, nil
	}
	resp, err := extproc.Process(context.Background(), cfg, d.dial, req, up)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func body(t *testing.T, r *extproc.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Body.Close()
	return string(b)
}

func waitRecord(t *testing.T, p *Proxy, id string) Record {
	t.Helper()
	var rec Record
	poll.Until(t, 10*time.Second, "record of "+id+" done", func() bool {
		var ok bool
		rec, ok = p.Record(id)
		return ok && rec.Done
	})
	return rec
}

func TestProxyRecordsPicks(t *testing.T) {
	picks := map[string]string{"r1": "10.0.0.1:8000", "r2": "10.0.0.2:8000"}
	for _, tc := range []struct {
		name     string
		eppCert  bool
		upTLS    func(c *SelfSigned) *UpstreamTLS
		serveTLS bool
	}{
		{name: "plaintext"},
		{name: "tls skip verify both ways", eppCert: true, upTLS: func(*SelfSigned) *UpstreamTLS { return &UpstreamTLS{InsecureSkipVerify: true} }, serveTLS: true},
		{name: "tls with CA", eppCert: true, upTLS: func(c *SelfSigned) *UpstreamTLS { return &UpstreamTLS{CAPEM: c.PEM} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cert *SelfSigned
			cfg := Config{}
			if tc.eppCert {
				var err error
				if cert, err = NewSelfSigned(); err != nil {
					t.Fatal(err)
				}
				cfg.UpstreamTLS = tc.upTLS(cert)
			}
			cfg.Upstream = startEPP(t, &fakeEPP{picks: picks}, cert)
			cfg.ServeTLS = tc.serveTLS
			p := startProxy(t, cfg)
			dp := newDataPlane(t, p.Addr(), p.ClientTLS())
			for _, id := range []string{"r1", "r2"} {
				if got := body(t, dp.get(t, id)); got != "from "+picks[id] {
					t.Fatalf("%s: body %q", id, got)
				}
			}
			for _, id := range []string{"r1", "r2"} {
				rec := waitRecord(t, p, id)
				if rec.PickedMetadata != picks[id] || rec.PickedHeader != picks[id] || rec.Served != picks[id] {
					t.Errorf("%s: record %+v", id, rec)
				}
				if got := rec.RequestHeaders[":path"]; len(got) != 1 || got[0] != "/v1/models" {
					t.Errorf("%s: request headers %v", id, rec.RequestHeaders)
				}
				if rec.Immediate != nil || rec.FromDataPlane != 3 || rec.FromEPP != 3 || rec.ResponseStatus != "200" {
					t.Errorf("%s: record %+v", id, rec)
				}
			}
			if n := len(p.Records()); n != 2 {
				t.Errorf("records = %d", n)
			}
		})
	}
}

func TestProxyForwardsFailures(t *testing.T) {
	for _, tc := range []struct {
		mode       string
		wantStatus int
		wantDetail string
		wantCode   codes.Code
	}{
		{"error", 500, "ext_proc_error_gRPC_error_8{shed}", codes.ResourceExhausted},
		{"immediate", 503, "no_ready_endpoints", codes.OK},
		{"close", 200, "", codes.OK}, // a clean close lets the request continue
	} {
		t.Run(tc.mode, func(t *testing.T) {
			p := startProxy(t, Config{Upstream: startEPP(t, &fakeEPP{mode: tc.mode}, nil)})
			resp := newDataPlane(t, p.Addr(), nil).get(t, "r-"+tc.mode)
			body(t, resp)
			if resp.Status != tc.wantStatus || resp.Details != tc.wantDetail {
				t.Fatalf("data plane got %d %q, want %d %q", resp.Status, resp.Details, tc.wantStatus, tc.wantDetail)
			}
			rec := waitRecord(t, p, "r-"+tc.mode)
			if tc.mode != "immediate" && rec.Code != tc.wantCode {
				t.Errorf("record code %v, want %v", rec.Code, tc.wantCode)
			}
			if tc.mode == "immediate" && (rec.Immediate == nil || rec.Immediate.Status != 503) {
				t.Errorf("immediate not recorded: %+v", rec)
			}
		})
	}
}

func TestProxyUpstreamDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	p := startProxy(t, Config{Upstream: addr})
	resp := newDataPlane(t, p.Addr(), nil).get(t, "r-down")
	body(t, resp)
	if resp.Status != 500 || !strings.HasPrefix(resp.Details, "ext_proc_error_gRPC_error_14") {
		t.Fatalf("got %d %q, want 500 gRPC error 14", resp.Status, resp.Details)
	}
	if rec := waitRecord(t, p, "r-down"); rec.Code != codes.Unavailable {
		t.Errorf("record %+v", rec)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := Start(context.Background(), Config{}); err == nil {
		t.Error("missing upstream accepted")
	}
	if _, err := Start(context.Background(), Config{Upstream: "127.0.0.1:1", ListenAddr: "0.0.0.0:0"}); err == nil {
		t.Error("non-loopback listen address accepted")
	}
}
