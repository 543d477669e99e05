// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"io"
	"net/http"
	"strings"
	"testing"
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
