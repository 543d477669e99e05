// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A local reply in gRPC form as Envoy makes it (Http::Utility::
// prepareLocalReply and PercentEncoding::encode in source/common/http/
// utility.cc; Grpc::Common::isGrpcRequestHeaders and hasGrpcContentType
// in source/common/grpc/common.cc; Grpc::Utility::httpToGrpcStatus in
// source/common/grpc/status.cc, after gRPC's
// doc/http-grpc-status-mapping.md): only application/grpc and
// application/grpc+... requests get it; the HTTP code maps to a gRPC
// status unless the reply already has one or the caller gives one; the
// body becomes grpc-message with every byte below ' ' or from '~' up, and
// '%', as upper-case %XX, and none for HEAD; no content-length, no body.
func TestGRPCLocalReplyAsEnvoy(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc": true, "application/grpc+proto": true,
		"application/grpc-web": false, "application/grpcx": false, "application/json": false, "": false,
	} {
		if got := IsGRPCRequest(http.Header{"Content-Type": {ct}}); got != want {
			t.Errorf("IsGRPCRequest(content-type %q) = %v, want %v", ct, got, want)
		}
	}
	for code, want := range map[int]int{400: 13, 401: 16, 403: 7, 404: 12, 429: 14, 502: 14, 503: 14, 504: 14, 500: 2, 408: 2, 200: 2} {
		if got := HTTPToGRPCStatus(code); got != want {
			t.Errorf("HTTPToGRPCStatus(%d) = %d, want %d", code, got, want)
		}
	}
	if got, want := percentEncode("a b%~}\x7f\x01\u00e9\n"), "a b%25%7E}%7F%01%C3%A9%0A"; got != want {
		t.Errorf("percentEncode = %q, want %q", got, want)
	}

	reply := func(status int, body string, extra http.Header) *Response {
		h := http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"99"}}
		for k, v := range extra {
			h[k] = v
		}
		return &Response{Status: status, Headers: h, Body: io.NopCloser(strings.NewReader(body)), Local: true}
	}
	grpcReq := func(method string) *Request {
		return &Request{Method: method, Headers: http.Header{"Content-Type": {"application/grpc"}}}
	}
	for _, tc := range []struct {
		name       string
		req        *Request
		resp       *Response
		grpcStatus int
		status     string
		message    string
	}{
		{"mapped from the HTTP code", grpcReq("POST"), reply(503, "no healthy upstream", nil), -1, "14", "no healthy upstream"},
		{"the caller's status", grpcReq("POST"), reply(504, "downstream duration timeout", nil), 4, "4", "downstream duration timeout"},
		{"a grpc-status already set is kept", grpcReq("POST"), reply(500, "", http.Header{"Grpc-Status": {"9"}}), 4, "9", ""},
		{"HEAD: no grpc-message", grpcReq("HEAD"), reply(404, "not here", nil), -1, "12", ""},
	} {
		got := GRPCLocalReply(tc.req, tc.resp, tc.grpcStatus)
		if got.Status != 200 || got.Headers.Get("grpc-status") != tc.status || got.Headers.Get("grpc-message") != tc.message ||
			got.Headers.Get("content-type") != "application/grpc" || got.Headers.Get("content-length") != "" || got.Body != http.NoBody {
			t.Errorf("%s: %d %v, want 200 grpc-status %s grpc-message %q, no content-length, no body", tc.name, got.Status, got.Headers, tc.status, tc.message)
		}
	}
	plain := GRPCLocalReply(&Request{Method: "GET", Headers: http.Header{}}, reply(503, "x", nil), -1)
	if plain.Status != 503 || plain.Headers.Get("grpc-status") != "" {
		t.Errorf("a reply to a request that is not gRPC changed: %d %v", plain.Status, plain.Headers)
	}
}

// An ImmediateResponse is a local reply whose modify_headers is the
// processor's header mutation (Filter::sendImmediateResponse,
// source/extensions/filters/http/ext_proc/ext_proc.cc); only after it does
// Http::Utility::prepareLocalReply (source/common/http/utility.cc) set a
// body's content-length (over the processor's) and content-type text/plain
// when none is set, or remove both when there is no body. So an appended
// or add-if-absent content-type is the only one.
func TestProcessImmediateResponseHeadersBeforeBody(t *testing.T) {
	opt := func(k, v string, legacyAppend bool, a corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
		o := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}, AppendAction: a}
		if legacyAppend {
			//lint:ignore SA1019 the legacy append flag is one of the ways a processor adds a header, so a case of its own
			o.Append = wrapperspb.Bool(true)
		}
		return o
	}
	for _, tc := range []struct {
		name   string
		body   string
		set    []*corev3.HeaderValueOption
		wantCT []string
		wantCL []string
	}{
		{"appended type", "shed", []*corev3.HeaderValueOption{opt("content-type", "application/json", true, 0), opt("content-length", "99", false, 0)},
			[]string{"application/json"}, []string{"4"}},
		{"type if absent", "shed", []*corev3.HeaderValueOption{opt("content-type", "application/json", false, corev3.HeaderValueOption_ADD_IF_ABSENT)},
			[]string{"application/json"}, []string{"4"}},
		{"no body", "", []*corev3.HeaderValueOption{opt("content-type", "application/json", false, 0), opt("content-length", "99", false, 0)},
			nil, nil},
		{"nothing set", "shed", nil, []string{"text/plain"}, []string{"4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dial := startProcessor(t, func(s extprocsvc.ExternalProcessor_ProcessServer, f *fakeProcessor) error {
				if _, err := f.recv(s); err != nil {
					return err
				}
				return s.Send(&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ImmediateResponse{
					ImmediateResponse: &extprocsvc.ImmediateResponse{
						Status:  &typeStatus{Code: 429},
						Headers: &extprocsvc.HeaderMutation{SetHeaders: tc.set},
						Body:    []byte(tc.body),
					}}})
			})
			up := &fakeUpstream{}
			resp, err := Process(context.Background(), testConfig(false), dial, postRequest("abc"), up.call)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != 429 || readAll(t, resp) != tc.body ||
				!slices.Equal(resp.Headers.Values("content-type"), tc.wantCT) || !slices.Equal(resp.Headers.Values("content-length"), tc.wantCL) {
				t.Fatalf("response %d %v; want 429, content-type %q, content-length %q", resp.Status, resp.Headers, tc.wantCT, tc.wantCL)
			}
		})
	}
}
