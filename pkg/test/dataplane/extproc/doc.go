// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package extproc is the client side of Envoy's ext_proc HTTP filter
// (envoy.filters.http.ext_proc) for the test data plane: it runs one HTTP
// request through an external processor (the GIE Endpoint Picker) over the
// bidirectional gRPC method envoy.service.ext_proc.v3.ExternalProcessor/Process,
// and then through the caller's upstream.
//
// Inputs: the HCM filter config and the route's (or weighted cluster's)
// ExtProcPerRoute, merged by Effective into a Config; a Dialer that connects
// to the processor's cluster; the downstream Request; an Upstream that
// forwards the (mutated) request, sees the dynamic metadata the processor set
// (envoy.lb, read by the OverrideHost load balancer) and reports what it adds
// after routing (the served endpoint).
//
// Output: the Response the downstream client gets. Failures of the processor
// become Envoy's local replies (a *Response with Status 500, or 504 for a
// per-message timeout, and Details as Envoy's response code details) unless
// failure_mode_allow lets the request continue unmodified. Process returns an
// error only for a cancelled ctx or an Upstream error.
//
// Rules for callers:
//   - ctx is the HTTP stream: cancel it to end the request (the route
//     timeout). Process never waits beyond ctx.
//   - Close Response.Body, or cancel ctx, when done: the gRPC stream stays open
//     while the response body streams through the processor.
//   - Request.Trailers and Response.Trailers, as in net/http, are complete
//     only once the corresponding Body has returned io.EOF.
//   - A Dialer error models Envoy failing to start the stream inline (cluster
//     missing, no healthy host); an error on the stream models a failure that
//     Envoy learns of asynchronously (connection refused, reset, gRPC
//     status). The difference matters: Envoy stops honouring
//     failure_mode_allow once a FULL_DUPLEX_STREAMED body has reached the
//     filter.
//
// ProcessResponse is the filter's encoder side alone, for a reply an
// earlier decoder filter made (the CORS filter's preflight answer): Envoy
// runs ext_proc's encodeHeaders on it although its decodeHeaders never ran.
//
// Only the behaviour the GIE EPP protocol needs is implemented; Effective
// returns an error naming any set field outside it (see config.go).
//
// # Files
//
//   - process.go: Request, Response, Upstream, Dialer, Process and
//     ProcessResponse, and run, one request's state and event loop: the stream,
//     the bodies pumped in each direction, the upstream call and the response
//     handed back.
//   - messages.go: each processor response handled as Envoy's onReceiveMessage
//     does, and immediate responses.
//   - streamed.go: STREAMED request bodies sent without waiting for the headers
//     response: chunks queued and answered one by one.
//   - failures.go: stream ends, failure_mode_allow, per-message timers and
//     timeouts, local replies and spurious messages.
//   - headers.go: the header map as Envoy sends it to the processor, and header
//     mutations checked and applied as Envoy's mutation rules do.
//   - pipe.go: bodyPipe, a body the processor streams back, handed to its
//     reader.
//   - config.go: Config and Effective: the filter config merged with a
//     per-route override, and every field outside what is implemented refused.
//   - merge.go: MergePerRoute, the ExtProcPerRoute a request sees when several
//     levels of the route table carry one.
//   - localreply.go: Envoy's local replies (prepareLocalReply): LocalReply
//     and SetLocalReplyBodyHeaders (the caller's header changes first, then
//     the body's content-length and content-type), and their gRPC form for
//     gRPC requests: HTTPToGRPCStatus and GRPCLocalReply.
//   - stats.go: Counters, the ext_proc filter statistics the tests read.
package extproc
