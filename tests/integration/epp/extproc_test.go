// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package epp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/infermesh/infermesh/pkg/test/poll"
)

// The EPP protocol's names for the pick.
const (
	destinationHeader = "x-gateway-destination-endpoint"
	lbNamespace       = "envoy.lb"
)

// streamBound bounds one ext_proc exchange.
const streamBound = 10 * time.Second

// exchange sends msgs on one new Process stream, half-closes it, and reads
// every response until the EPP ends the stream. It returns the responses and
// the stream's final error (nil when the EPP ended it with OK).
func exchange(conn *grpc.ClientConn, msgs ...*extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), streamBound)
	defer cancel()
	stream, err := extprocv3.NewExternalProcessorClient(conn).Process(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			return nil, fmt.Errorf("send: %w", err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	var out []*extprocv3.ProcessingResponse
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

// requestHeaders is the request_headers message Envoy sends for method on
// /v1/completions, with extra header pairs (key, value, ...).
func requestHeaders(method string, endOfStream bool, extra ...string) *extprocv3.ProcessingRequest {
	kv := append([]string{
		":method", method, ":path", "/v1/completions", ":authority", "llm.example", ":scheme", "http",
		"content-type", "application/json", "x-request-id", "epp-test",
	}, extra...)
	h := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Headers = append(h.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: h, EndOfStream: endOfStream},
	}}
}

// bodyChunks splits body into n request_body messages, as Envoy streams them
// under FULL_DUPLEX_STREAMED, the last with end_of_stream.
func bodyChunks(body string, n int) []*extprocv3.ProcessingRequest {
	var out []*extprocv3.ProcessingRequest
	size := (len(body) + n - 1) / n
	for start := 0; start < len(body); start += size {
		end := min(start+size, len(body))
		out = append(out, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: []byte(body[start:end]), EndOfStream: end == len(body)},
		}})
	}
	return out
}

// responseHeaders is the response_headers message Envoy sends for a 200
// whose body follows.
func responseHeaders() *extprocv3.ProcessingRequest {
	h := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
		{Key: ":status", RawValue: []byte("200")}, {Key: "content-type", RawValue: []byte("application/json")},
	}}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: h},
	}}
}

// responseBodyChunks splits body into n response_body messages, the last
// with end_of_stream.
func responseBodyChunks(body string, n int) []*extprocv3.ProcessingRequest {
	var out []*extprocv3.ProcessingRequest
	for _, m := range bodyChunks(body, n) {
		b := m.GetRequestBody()
		out = append(out, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: b.GetBody(), EndOfStream: b.GetEndOfStream()},
		}})
	}
	return out
}

// pick is the endpoint the EPP chose, as the request header and as dynamic
// metadata; the protocol wants both, equal.
type pick struct {
	header, metadata string
}

// pickOf finds the request_headers response and reads the pick from it.
func pickOf(resps []*extprocv3.ProcessingResponse) (pick, bool) {
	for _, r := range resps {
		h := r.GetRequestHeaders()
		if h == nil {
			continue
		}
		var p pick
		for _, o := range h.GetResponse().GetHeaderMutation().GetSetHeaders() {
			if strings.EqualFold(o.GetHeader().GetKey(), destinationHeader) {
				p.header = string(o.GetHeader().GetRawValue()) + o.GetHeader().GetValue()
			}
		}
		p.metadata = r.GetDynamicMetadata().GetFields()[lbNamespace].GetStructValue().GetFields()[destinationHeader].GetStringValue()
		return p, true
	}
	return pick{}, false
}

// describe renders the responses in order, one line each, for logs and
// failure messages.
func describe(resps []*extprocv3.ProcessingResponse) string {
	var b strings.Builder
	for i, r := range resps {
		fmt.Fprintf(&b, "  %d: ", i)
		switch v := r.GetResponse().(type) {
		case *extprocv3.ProcessingResponse_RequestHeaders:
			p, _ := pickOf([]*extprocv3.ProcessingResponse{r})
			fmt.Fprintf(&b, "request_headers (header %s=%q, metadata %s/%s=%q, clear_route_cache %v)",
				destinationHeader, p.header, lbNamespace, destinationHeader, p.metadata, v.RequestHeaders.GetResponse().GetClearRouteCache())
		case *extprocv3.ProcessingResponse_RequestBody:
			describeBody(&b, "request_body", v.RequestBody)
		case *extprocv3.ProcessingResponse_ResponseHeaders:
			b.WriteString("response_headers")
		case *extprocv3.ProcessingResponse_ResponseBody:
			describeBody(&b, "response_body", v.ResponseBody)
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			fmt.Fprintf(&b, "immediate_response (status %v, body %q)", v.ImmediateResponse.GetStatus().GetCode(), v.ImmediateResponse.GetBody())
		default:
			fmt.Fprintf(&b, "%T", v)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// describeBody renders one body response for describe.
func describeBody(b *strings.Builder, kind string, r *extprocv3.BodyResponse) {
	m := r.GetResponse().GetBodyMutation()
	switch {
	case m.GetStreamedResponse() != nil:
		fmt.Fprintf(b, "%s (streamed_response body %q, end_of_stream %v)",
			kind, m.GetStreamedResponse().GetBody(), m.GetStreamedResponse().GetEndOfStream())
	case m != nil:
		fmt.Fprintf(b, "%s (body mutation %v)", kind, m)
	default:
		fmt.Fprintf(b, "%s (empty common response: no body mutation)", kind)
	}
}

// streamedBody concatenates the request body the EPP streams back.
func streamedBody(resps []*extprocv3.ProcessingResponse) (body string, endOfStream bool) {
	var bodies []*extprocv3.BodyResponse
	for _, r := range resps {
		bodies = append(bodies, r.GetRequestBody())
	}
	return concatStreamed(bodies)
}

// streamedResponseBody concatenates the response body the EPP streams back.
func streamedResponseBody(resps []*extprocv3.ProcessingResponse) (body string, endOfStream bool) {
	var bodies []*extprocv3.BodyResponse
	for _, r := range resps {
		bodies = append(bodies, r.GetResponseBody())
	}
	return concatStreamed(bodies)
}

// concatStreamed concatenates the streamed_response bodies of rs (nil
// entries skipped) and says whether one ended the stream.
func concatStreamed(rs []*extprocv3.BodyResponse) (body string, endOfStream bool) {
	for _, r := range rs {
		if s := r.GetResponse().GetBodyMutation().GetStreamedResponse(); s != nil {
			body += string(s.GetBody())
			endOfStream = endOfStream || s.GetEndOfStream()
		}
	}
	return body, endOfStream
}

// untilPick repeats the exchange until it yields a pick (the EPP's pod
// informer, and the full EPP's first scrapes, trail its readiness), or fails
// the test after bound with the last outcome.
func untilPick(t *testing.T, conn *grpc.ClientConn, bound time.Duration, msgs ...*extprocv3.ProcessingRequest) (pick, []*extprocv3.ProcessingResponse) {
	t.Helper()
	var (
		p     pick
		resps []*extprocv3.ProcessingResponse
		err   error
	)
	poll.UntilOr(t, bound, "a pick from the EPP", func() bool {
		var ok bool
		resps, err = exchange(conn, msgs...)
		p, ok = pickOf(resps)
		return ok && err == nil && p.header != ""
	}, func() string { return fmt.Sprintf("last stream error %v, responses:\n%s", err, describe(resps)) })
	return p, resps
}

// dialPlain is a plaintext client for addr, closed at t's cleanup.
func dialPlain(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
