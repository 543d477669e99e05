// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"io"
	"net/http"
	"strconv"
	"strings"
)

// This file is Envoy's local reply, shared by the connection manager, the
// router and this filter because Response lives here. Envoy builds every
// local reply in Http::Utility::prepareLocalReply
// (source/common/http/utility.cc): the caller's modify_headers first, then
// the body's content-length and content-type (LocalReply). When the
// request is gRPC (is_grpc_, from Grpc::Common::isGrpcRequestHeaders), the
// reply becomes:
//
//   - :status 200 and content-type application/grpc;
//   - grpc-status, unless the reply already has one: the caller's gRPC
//     status when it gave one (ext_proc's ImmediateResponse.grpc_status),
//     else Grpc::Utility::httpToGrpcStatus of the HTTP code;
//   - grpc-message, the body text percent-encoded
//     (Http::Utility::PercentEncoding::encode), when there is a body and
//     the request is not HEAD;
//   - no content-length, and no body: the headers end the stream
//     (encodeLocalReply, "Trailers only response").

// LocalReply is Http::Utility::prepareLocalReply for a request that is not
// gRPC (GRPCLocalReply turns it into the gRPC form afterwards): the
// headers start empty and modify, the caller's modify_headers (nil for
// none), changes them first, then the body decides content-length and
// content-type (SetLocalReplyBodyHeaders). The router's direct responses
// pass their Location and the route's response headers as modify_headers,
// ext_proc's ImmediateResponse the processor's header mutation.
func LocalReply(status int, body string, modify func(http.Header)) *Response {
	h := http.Header{}
	if modify != nil {
		modify(h)
	}
	SetLocalReplyBodyHeaders(h, len(body))
	return &Response{Status: status, Headers: h, Body: io.NopCloser(strings.NewReader(body)), Local: true}
}

// SetLocalReplyBodyHeaders is the part of prepareLocalReply after
// modify_headers for a request that is not gRPC: a body of n > 0 bytes sets
// content-length to n, over whatever was set, and content-type to
// text/plain unless one was set; no body removes both, whoever set them.
func SetLocalReplyBodyHeaders(h http.Header, n int) {
	if n == 0 {
		h.Del("content-length")
		h.Del("content-type")
		return
	}
	h.Set("content-length", strconv.Itoa(n))
	if _, ok := h["Content-Type"]; !ok {
		h.Set("content-type", "text/plain")
	}
}

// IsGRPCRequest is Grpc::Common::isGrpcRequestHeaders for a request with
// a path: its content-type is application/grpc, alone or followed by "+"
// (application/grpc+proto); application/grpc-web is not gRPC.
func IsGRPCRequest(h http.Header) bool {
	ct := h.Get("content-type")
	const grpcType = "application/grpc"
	return ct == grpcType || strings.HasPrefix(ct, grpcType+"+")
}

// HTTPToGRPCStatus is Grpc::Utility::httpToGrpcStatus
// (source/common/grpc/status.cc), after gRPC's
// doc/http-grpc-status-mapping.md.
func HTTPToGRPCStatus(code int) int {
	switch code {
	case http.StatusBadRequest:
		return 13 // INTERNAL
	case http.StatusUnauthorized:
		return 16 // UNAUTHENTICATED
	case http.StatusForbidden:
		return 7 // PERMISSION_DENIED
	case http.StatusNotFound:
		return 12 // UNIMPLEMENTED
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return 14 // UNAVAILABLE
	}
	return 2 // UNKNOWN
}

// GRPCLocalReply turns resp, a local reply to req, into its gRPC form when
// req is a gRPC request; grpcStatus < 0 means none was given. A reply to
// any other request, or one already in gRPC form, is returned unchanged.
func GRPCLocalReply(req *Request, resp *Response, grpcStatus int) *Response {
	if resp == nil || resp.grpcForm || req == nil || !IsGRPCRequest(req.Headers) {
		return resp
	}
	var body string
	if resp.Body != nil && resp.Body != http.NoBody {
		// A local reply's body is in memory.
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		body = string(b)
	}
	h := resp.Headers
	if h == nil {
		h = http.Header{}
	}
	if h.Get("grpc-status") == "" {
		code := grpcStatus
		if code < 0 {
			code = HTTPToGRPCStatus(resp.Status)
		}
		h.Set("grpc-status", strconv.Itoa(code))
	}
	if body != "" && req.Method != http.MethodHead {
		// Envoy strips one trailing newline only from a JSON body (its
		// JSON formatter adds it); these bodies are text.
		h.Set("grpc-message", percentEncode(body))
	}
	h.Set("content-type", "application/grpc")
	h.Del("content-length")
	resp.Status = http.StatusOK
	resp.Headers = h
	resp.Body = http.NoBody
	resp.Trailers = http.Header{}
	resp.grpcForm = true
	return resp
}

// percentEncode is Http::Utility::PercentEncoding::encode: every byte
// below ' ' or from '~' up, and '%' itself, as %XX.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c >= '~' || c == '%' {
			b.WriteString("%" + strings.ToUpper(strconv.FormatInt(int64(c)|0x100, 16)[1:]))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
