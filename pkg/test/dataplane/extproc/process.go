// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Request is the downstream request as the filter sees it.
type Request struct {
	Method, Path, Authority, Scheme string
	Headers                         http.Header
	// Body is nil (or http.NoBody) for a request without a body: the
	// request headers message then carries end_of_stream true.
	Body io.Reader
	// Trailers are read once Body has returned io.EOF.
	Trailers http.Header
	// Upgrade is the protocol of an upgrade request the connection manager
	// accepted (its upgrade_configs: "websocket"), "" for any other; the
	// router then keeps Connection and Upgrade for the upstream.
	Upgrade string
	// RouteCacheCleared is set on the request Process hands to its
	// Upstream when the processor's request headers response cleared the
	// route cache (clearRouteCache): the caller selects the route again.
	RouteCacheCleared bool
}

// Response is what the downstream client gets.
type Response struct {
	Status   int
	Headers  http.Header
	Body     io.ReadCloser
	Trailers http.Header
	// Details is Envoy's response code details for a reply the filter made
	// itself: ImmediateResponse.details, or ext_proc_error_* for a failure.
	// Empty for an upstream response.
	Details string
	// Direct marks a local reply the filter sent after response headers
	// had reached it: Envoy's DownstreamFilterManager::sendLocalReply then
	// uses sendDirectLocalReply, which writes to the codec and bypasses
	// every encoder filter (source/common/http/filter_manager.cc), so no
	// other filter may change it.
	Direct bool
	// Local marks a reply the data plane made itself (Envoy's
	// sendLocalReply) rather than one from an upstream: a gRPC request
	// gets it in gRPC form (GRPCLocalReply).
	Local bool
	// grpcForm is set once GRPCLocalReply has rewritten the reply.
	grpcForm bool
}

// Upstream forwards the (possibly mutated) request and returns the upstream
// response; metadata is the dynamic metadata the processor set (namespace ->
// struct); served is what the data plane adds after routing (envoy.lb
// x-gateway-destination-endpoint-served), which Process forwards back to the
// processor in the response phase's metadata_context per
// metadata_options.forwarding_namespaces.
type Upstream func(ctx context.Context, req *Request, metadata map[string]*structpb.Struct) (resp *Response, served map[string]*structpb.Struct, err error)

// Dialer returns a gRPC connection to a cluster.
type Dialer func(ctx context.Context, cluster, authority string) (grpc.ClientConnInterface, error)

const (
	errorPrefix  = "ext_proc_error"
	readChunk    = 32 << 10
	maxChunks    = 1 << 20 // bound on body reads per direction
	maxLoopSteps = 1 << 24 // bound on events per request

	// heldBodyGrace is how long a request body may take to reach the
	// filter before processor events are handled ahead of it. Envoy's
	// codec hands a body sent with the headers to the filter in the same
	// dispatch, before any event of the processor's stream, so such a body
	// always counts as received first (ProcessorState::bodyReceived, which
	// ends failure_mode_allow in FULL_DUPLEX_STREAMED mode). A body the
	// client holds back arrives after the processor's events, and an error
	// among them still fails open. Which of the two happens when the body
	// and the error race within this bound is a matter of timing in Envoy
	// too, so no test can depend on it.
	heldBodyGrace = time.Second
)

// ErrStreamReset is the body error the caller sees when the filter resets
// a stream whose response headers were already delivered (Envoy cannot send
// a local reply then and resets the downstream stream).
var ErrStreamReset = errors.New("ext_proc: stream reset after response headers")

// Process runs one request through the external processor and upstream, as
// Envoy's ext_proc filter does (source/extensions/filters/http/ext_proc):
//
//   - one bidirectional Process stream per request, opened when the first
//     message must be sent; grpc_service.timeout is not applied, as Envoy's
//     ext_proc client starts the stream without a timeout;
//   - request headers (pseudo-headers first, values in raw_value) with
//     end_of_stream true when there is no body; the first message carries
//     protocol_config, every message metadata_context with the
//     forwarding_namespaces present in the dynamic metadata;
//   - FULL_DUPLEX_STREAMED: body chunks go to the processor as they are
//     read, without waiting for the headers response; the last carries
//     end_of_stream, unless trailers follow (then a trailers message ends
//     the body); what the upstream gets is what the processor streams back
//     in streamed_response; no per-message timeout in this mode;
//   - STREAMED request bodies (with send_body_without_waiting, see
//     streamed.go): chunks sent at once and queued, handed upstream as the
//     processor answers each, after its headers response; one message
//     timer per direction;
//   - the request continues upstream once the request headers response is
//     applied (or at once when headers are SKIP), so the OverrideHost pick
//     is the metadata set by then;
//   - response phase the same way, with the served endpoint in the dynamic
//     metadata; Process returns once the response headers are processed and
//     the response body, if processed, streams through Response.Body;
//   - dynamic_metadata accepted only for receiving_namespaces (untyped),
//     merged key by key into a namespace as Envoy's setDynamicMetadata does;
//   - immediate_response: status (default 200; below 200 becomes 200),
//     headers (permissive rules), body; the upstream is not called (or its
//     response dropped);
//   - mode_override is ignored (allow_mode_override is rejected by
//     Effective), as is override_message_timeout (max_message_timeout
//     unset);
//   - failures: a gRPC error (status_on_error, default 500,
//     "ext_proc_error_gRPC_error_<code>{<message>}"), a per-message timeout
//     (504), a spurious message or a rejected mutation (status_on_error):
//     with failure_mode_allow the request continues unmodified and
//     FailureModeAllowed counts it, except that Envoy stops allowing
//     failures once a FULL_DUPLEX_STREAMED body has reached the filter in
//     either direction; a stream the processor closes with OK ends
//     processing and the request continues, whatever failure_mode_allow.
func Process(ctx context.Context, cfg Config, dial Dialer, req *Request, up Upstream) (*Response, error) {
	r := newRun(ctx, cfg, dial, req, up)
	go r.loop()
	o := <-r.result
	return o.resp, o.err
}

// ProcessResponse runs a response through the filter's encoder side alone:
// Envoy's Filter::encodeHeaders when the filter's decodeHeaders never ran,
// which is how a local reply started by an earlier decoder filter (the
// CORS filter's preflight answer) reaches it, since FilterManager sends
// such a reply through every encoder filter from the start of the encoder
// chain (commonEncodePrefix with no filter returns encoder_filters_.begin(),
// source/common/http/filter_manager.cc). encodeHeaders merges the
// per-route config itself ("in case the decodeHeaders() is not called when
// processing local reply", ext_proc.cc) and, when the response header mode
// is SEND, opens the stream with response_headers as its first message
// (carrying protocol_config). Failures are handled as in Process:
// failure_mode_allow continues with resp unchanged; otherwise the error
// reply is Direct, as the response headers already exist.
func ProcessResponse(ctx context.Context, cfg Config, dial Dialer, resp *Response) (*Response, error) {
	r := newRun(ctx, cfg, dial, &Request{Headers: http.Header{}}, nil)
	r.localIn = resp
	go r.loop()
	o := <-r.result
	return o.resp, o.err
}

type outcome struct {
	resp *Response
	err  error
}

type recvEvent struct {
	st  extprocsvc.ExternalProcessor_ProcessClient
	msg *extprocsvc.ProcessingResponse
	err error
}

type pumpEvent struct {
	started  bool // the first Read returned: the body has reached the filter
	data     []byte
	last     bool
	trailers http.Header
	err      error
}

type upEvent struct {
	resp   *Response
	served map[string]*structpb.Struct
	err    error
}

// run is the state of one request; only loop's goroutine touches it.
type run struct {
	cfg Config
	c   *Counters
	// routeCacheCleared: a request headers response cleared the route
	// cache (messages.go clearRouteCache).
	routeCacheCleared bool
	ctx               context.Context
	dial              Dialer
	req               *Request
	up                Upstream

	result   chan outcome
	done     chan struct{}
	recvCh   chan recvEvent
	reqPump  chan pumpEvent
	respPump chan pumpEvent
	upCh     chan upEvent
	timerCh  chan timerEvent
	readerCl chan struct{}

	stream       extprocsvc.ExternalProcessor_ProcessClient
	streamCancel context.CancelFunc
	pendingErr   error // stream failed to start; reported once the gate opens
	protoSent    bool
	complete     bool // Envoy's processing_complete_
	delivered    bool
	md           map[string]*structpb.Struct
	localIn      *Response // ProcessResponse: the response, no request phase

	// decoding and encoding are the state of the request and the response
	// direction, as Envoy's filter keeps one ProcessorState for each
	// (processor_state.go).
	decoding decodingState
	encoding encodingState
}

func newRun(ctx context.Context, cfg Config, dial Dialer, req *Request, up Upstream) *run {
	c := cfg.Counters
	if c == nil {
		c = DefaultCounters
	}
	if cfg.StatusOnError == 0 {
		cfg.StatusOnError = 500
	}
	return &run{
		cfg: cfg, c: c, ctx: ctx, dial: dial, req: req, up: up,
		result:   make(chan outcome, 1),
		done:     make(chan struct{}),
		recvCh:   make(chan recvEvent),
		reqPump:  make(chan pumpEvent),
		respPump: make(chan pumpEvent),
		upCh:     make(chan upEvent),
		timerCh:  make(chan timerEvent),
		readerCl: make(chan struct{}, 1),
		md:       map[string]*structpb.Struct{},
	}
}

func (r *run) deliver(resp *Response, err error) {
	if r.delivered {
		return
	}
	r.delivered = true
	r.result <- outcome{resp, err}
}

func (r *run) loop() {
	defer r.cleanup()
	if r.localIn != nil {
		r.startEncodeOnly()
	} else {
		r.start()
	}
	for i := 0; i < maxLoopSteps && !r.finished(); i++ {
		if r.decoding.gate && r.pendingErr != nil {
			err := r.pendingErr
			r.pendingErr = nil
			r.onStreamEnd(err)
			continue
		}
		recvCh := r.recvCh
		var held <-chan time.Time
		if !r.decoding.gate {
			recvCh = nil
			held = r.decoding.gateTimer.C
		}
		select {
		case <-r.ctx.Done():
			r.abort(r.ctx.Err())
			return
		case <-r.readerCl:
			r.abort(io.ErrClosedPipe)
			return
		case ev := <-recvCh:
			if r.ctx.Err() != nil {
				// The request ended first (its end cancels the stream):
				// Envoy destroys the filter and never sees the stream's
				// close, so no failure_mode_allow continuation.
				r.abort(r.ctx.Err())
				return
			}
			if ev.st != r.stream {
				continue // a stream this filter already closed
			}
			if ev.err != nil {
				r.stream = nil
				r.onStreamEnd(ev.err)
			} else {
				r.onMessage(ev.msg)
			}
		case ev := <-r.reqPump:
			r.onReqPump(ev)
		case ev := <-r.respPump:
			r.onRespPump(ev)
		case ev := <-r.upCh:
			r.onUpstream(ev)
		case ev := <-r.timerCh:
			r.onTimeout(ev)
		case <-held:
			r.decoding.gate = true // the body is held back: the processor's events come first
		}
		if !r.complete && r.stream != nil && !r.needsMore() {
			// Envoy closes the stream once the last expected response is in
			// (closeGrpcStreamIfLastRespReceived) and ignores it afterwards.
			r.closeStream()
			r.complete = true
		}
	}
	if !r.finished() {
		r.abort(errors.New("ext_proc: event bound exceeded"))
	}
}

func (r *run) cleanup() {
	r.stopTimers()
	if r.decoding.gateTimer != nil {
		r.decoding.gateTimer.Stop()
	}
	r.closeStream()
	close(r.done)
	if !r.delivered {
		r.deliver(nil, r.ctx.Err())
	}
	if r.encoding.pipe != nil && r.encoding.upResp != nil && r.encoding.upResp.Body != nil {
		_ = r.encoding.upResp.Body.Close() // we own the upstream body we piped
	}
}

// finished: the caller has its answer and no body we feed is still open.
func (r *run) finished() bool {
	return r.delivered && (r.decoding.pipe == nil || r.decoding.pipe.finished()) && (r.encoding.pipe == nil || r.encoding.pipe.finished())
}

func (r *run) abort(err error) {
	r.deliver(nil, err)
	if r.decoding.pipe != nil {
		r.decoding.pipe.finish(err, nil)
	}
	if r.encoding.pipe != nil {
		r.encoding.pipe.finish(err, nil)
	}
}

// needsMore reports whether a processor response is still expected.
func (r *run) needsMore() bool {
	pm := r.cfg.ProcessingMode
	if r.decoding.hdrsPending || r.decoding.trPending || r.encoding.hdrsPending || r.encoding.trPending {
		return true
	}
	if duplexReq(pm) && r.decoding.hasBody && (r.decoding.pipe == nil || !r.decoding.pipe.finished()) {
		return true
	}
	if streamedReq(pm) && r.decoding.hasBody && (!r.decoding.last || len(r.decoding.queue) > 0) {
		return true // body chunks still to send, or their responses still to come
	}
	respNoop := !sendRespHeaders(pm) && !duplexResp(pm) && !sendRespTrailers(pm)
	if respNoop {
		return false
	}
	if r.encoding.upResp == nil {
		return true // the response phase is still to come
	}
	return duplexResp(pm) && r.encoding.hasBody && r.encoding.pipe != nil && !r.encoding.pipe.finished()
}

func (r *run) start() {
	pm := r.cfg.ProcessingMode
	req := r.req
	r.decoding.hasBody = req.Body != nil && req.Body != http.NoBody
	r.decoding.hdrs = requestHeaderMap(req.Method, req.Path, req.Authority, req.Scheme, req.Headers)
	r.decoding.gate = true
	if r.decoding.hasBody && reqBodyToProcessor(pm) {
		r.decoding.gate = false
		r.decoding.gateTimer = time.NewTimer(heldBodyGrace)
		go r.pump(req.Body, func() http.Header { return req.Trailers }, r.reqPump)
	}
	if !sendReqHeaders(pm) {
		r.startUpstream()
		return
	}
	if !r.open() {
		if !r.delivered {
			r.startUpstream() // the stream failed at start and failures are allowed
		}
		return
	}
	r.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocsvc.HttpHeaders{Headers: r.decoding.hdrs.toProto(), EndOfStream: !r.decoding.hasBody},
	}})
	r.decoding.hdrsPending = true
	r.startTimer(decode)
	if reqBodyToProcessor(pm) && !r.cfg.AllowContentLengthHeader {
		// Envoy drops content-length after sending the headers when the
		// body may be rewritten (shouldRemoveContentLength).
		r.decoding.hdrs.remove("content-length")
	}
}

// startEncodeOnly begins at the response phase: no request headers were
// decoded, so nothing of the request goes to the processor.
func (r *run) startEncodeOnly() {
	r.decoding.gate = true
	r.decoding.upStarted = true
	r.onUpstream(upEvent{resp: r.localIn})
}

// open starts the stream if needed. A Dialer error is handled at once, as
// Envoy handles a stream that fails while starting (before any body has
// reached the filter); a failure to create the stream is reported like a
// later stream error.
func (r *run) open() bool {
	if r.complete {
		return false
	}
	if r.stream != nil || r.pendingErr != nil {
		return true
	}
	authority := r.cfg.Authority
	if authority == "" {
		authority = r.cfg.GrpcCluster
	}
	conn, err := r.dial(r.ctx, r.cfg.GrpcCluster, authority)
	if err != nil {
		r.onStreamEnd(err)
		return !r.complete
	}
	// The stream carries no deadline, as Envoy's does not while
	// grpc_service.timeout is unset: a grpc-timeout taken from the
	// request's deadline (max_stream_duration) would let the processor end
	// the stream first, which failure_mode_allow turns into a continuation
	// upstream. The request's end still cancels it.
	sctx, cancelStream := context.WithCancel(context.WithoutCancel(r.ctx))
	stop := context.AfterFunc(r.ctx, cancelStream)
	cancel := func() { stop(); cancelStream() }
	st, err := extprocsvc.NewExternalProcessorClient(conn).Process(sctx)
	if err != nil {
		cancel()
		r.c.StreamsStarted.Add(1)
		r.pendingErr = err
		return true
	}
	r.c.StreamsStarted.Add(1)
	r.stream, r.streamCancel = st, cancel
	go r.receive(st)
	return true
}

func (r *run) receive(st extprocsvc.ExternalProcessor_ProcessClient) {
	for i := 0; ; i++ {
		msg, err := st.Recv()
		if err == nil && i >= maxLoopSteps {
			err = errors.New("ext_proc: message bound exceeded")
		}
		select {
		case r.recvCh <- recvEvent{st, msg, err}:
		case <-r.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (r *run) closeStream() {
	if r.streamCancel != nil {
		r.streamCancel()
	}
	r.stream, r.streamCancel = nil, nil
}

// send adds metadata_context (and protocol_config on the first message) and
// sends. Send errors are ignored: the stream's status arrives through Recv.
func (r *run) send(m *extprocsvc.ProcessingRequest) {
	m.MetadataContext = r.forwardingMetadata()
	if !r.protoSent {
		r.protoSent = true
		m.ProtocolConfig = &extprocsvc.ProtocolConfiguration{
			RequestBodyMode:  r.cfg.ProcessingMode.GetRequestBodyMode(),
			ResponseBodyMode: r.cfg.ProcessingMode.GetResponseBodyMode(),
			// Filter::encodeProtocolConfig (ext_proc.cc) sends the flag too.
			SendBodyWithoutWaitingForHeaderResponse: r.cfg.SendBodyWithoutWaiting,
		}
	}
	if r.stream != nil {
		_ = r.stream.Send(m)
	}
}

// forwardingMetadata is Envoy's addDynamicMetadata: the untyped forwarding
// namespaces present in the stream's dynamic metadata (typed metadata does
// not exist in this data plane).
func (r *run) forwardingMetadata() *corev3.Metadata {
	out := &corev3.Metadata{}
	for _, ns := range r.cfg.MetadataOptions.GetForwardingNamespaces().GetUntyped() {
		if s, ok := r.md[ns]; ok {
			if out.FilterMetadata == nil {
				out.FilterMetadata = map[string]*structpb.Struct{}
			}
			out.FilterMetadata[ns] = proto.Clone(s).(*structpb.Struct)
		}
	}
	return out
}

// setMetadata is Envoy's setDynamicMetadata: each namespace of the
// response's dynamic_metadata listed in receiving_namespaces.untyped is
// merged into the stream's metadata; others are dropped.
func (r *run) setMetadata(dm *structpb.Struct) {
	for ns, v := range dm.GetFields() {
		for _, allowed := range r.cfg.MetadataOptions.GetReceivingNamespaces().GetUntyped() {
			if ns == allowed {
				mergeNamespace(r.md, ns, v.GetStructValue())
			}
		}
	}
}

func mergeNamespace(md map[string]*structpb.Struct, ns string, s *structpb.Struct) {
	cur, ok := md[ns]
	if !ok {
		cur = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		md[ns] = cur
	}
	if cur.Fields == nil {
		cur.Fields = map[string]*structpb.Value{}
	}
	for k, v := range s.GetFields() {
		cur.Fields[k] = proto.Clone(v).(*structpb.Value)
	}
}

func cloneMetadata(md map[string]*structpb.Struct) map[string]*structpb.Struct {
	out := make(map[string]*structpb.Struct, len(md))
	for k, v := range md {
		out[k] = proto.Clone(v).(*structpb.Struct)
	}
	return out
}

// pump reads a body as the codec would hand it to the filter: chunk by
// chunk, knowing a chunk is the last only when the next read ends.
func (r *run) pump(body io.Reader, trailers func() http.Header, out chan<- pumpEvent) {
	emit := func(ev pumpEvent) bool {
		select {
		case out <- ev:
			return true
		case <-r.done:
			return false
		}
	}
	buf := make([]byte, readChunk)
	var held []byte
	have := false
	for i := 0; i < maxChunks; i++ {
		n, err := body.Read(buf)
		if i == 0 && !emit(pumpEvent{started: true}) {
			return
		}
		if n > 0 {
			if have && !emit(pumpEvent{data: held}) {
				return
			}
			held, have = append([]byte(nil), buf[:n]...), true
		}
		if errors.Is(err, io.EOF) {
			emit(pumpEvent{data: held, last: true, trailers: trailers()})
			return
		}
		if err != nil {
			emit(pumpEvent{err: err})
			return
		}
	}
	emit(pumpEvent{err: errors.New("ext_proc: body chunk bound exceeded")})
}

func (r *run) startUpstream() {
	if r.decoding.upStarted {
		return
	}
	r.decoding.upStarted = true
	pm := r.cfg.ProcessingMode
	up := &Request{Headers: r.decoding.hdrs.plain(), RouteCacheCleared: r.routeCacheCleared}
	up.Method, _ = r.decoding.hdrs.get(":method")
	up.Path, _ = r.decoding.hdrs.get(":path")
	up.Authority, _ = r.decoding.hdrs.get(":authority")
	up.Scheme, _ = r.decoding.hdrs.get(":scheme")
	switch {
	case !r.decoding.hasBody:
		up.Trailers = r.req.Trailers
	case duplexReq(pm):
		up.Trailers = http.Header{}
		r.decoding.pipe = newBodyPipe(up.Trailers, nil)
		up.Body = r.decoding.pipe
		if r.complete && r.decoding.last {
			r.decoding.pipe.finish(nil, r.decoding.trailersIn)
		}
	case streamedReq(pm):
		up.Trailers = http.Header{}
		r.decoding.pipe = newBodyPipe(up.Trailers, nil)
		up.Body = r.decoding.pipe
		for _, b := range r.decoding.held {
			r.decoding.pipe.write(b)
		}
		r.decoding.held = nil
		if r.decoding.last && len(r.decoding.queue) == 0 {
			r.decoding.pipe.finish(nil, r.decoding.trailersIn)
		}
	default:
		up.Body, up.Trailers = r.req.Body, r.req.Trailers
	}
	md := cloneMetadata(r.md)
	go func() {
		resp, served, err := r.up(r.ctx, up, md)
		select {
		case r.upCh <- upEvent{resp, served, err}:
		case <-r.done:
			if resp != nil && resp.Body != nil {
				_ = resp.Body.Close()
			}
		}
	}()
}

func (r *run) onReqPump(ev pumpEvent) {
	pm := r.cfg.ProcessingMode
	switch {
	case ev.started:
		r.decoding.bodyRecv, r.decoding.gate = true, true
		return
	case ev.err != nil:
		// The downstream body failed: Envoy resets the whole stream.
		r.closeStream()
		r.complete = true
		r.abort(ev.err)
		return
	}
	if ev.last {
		r.decoding.last, r.decoding.trailersIn = true, ev.trailers
	}
	if r.complete {
		switch {
		case r.decoding.pipe != nil:
			r.decoding.pipe.write(ev.data)
			if ev.last {
				r.decoding.pipe.finish(nil, ev.trailers)
			}
		case streamedReq(pm):
			r.decoding.held = append(r.decoding.held, ev.data) // the upstream starts once the headers continue
		}
		return
	}
	if !r.open() {
		r.onReqPump(ev) // processing is complete now: pass the chunk through
		return
	}
	if streamedReq(pm) {
		r.sendStreamedChunk(ev)
		return
	}
	withTrailers := ev.last && len(ev.trailers) > 0 && sendReqTrailers(pm)
	r.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_RequestBody{
		RequestBody: &extprocsvc.HttpBody{Body: ev.data, EndOfStream: ev.last && !withTrailers},
	}})
	if withTrailers {
		r.decoding.trailers = plainFields(ev.trailers)
		r.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_RequestTrailers{
			RequestTrailers: &extprocsvc.HttpTrailers{Trailers: r.decoding.trailers.toProto()},
		}})
		r.decoding.trPending = true
	}
}

func (r *run) onRespPump(ev pumpEvent) {
	pm := r.cfg.ProcessingMode
	switch {
	case ev.started:
		r.encoding.bodyRecv = true
		return
	case ev.err != nil:
		r.closeStream()
		r.complete = true
		r.encoding.pipe.finish(ev.err, nil)
		return
	}
	if ev.last {
		r.encoding.last, r.encoding.trailersIn = true, ev.trailers
	}
	if r.complete {
		r.encoding.pipe.write(ev.data)
		if ev.last {
			r.encoding.pipe.finish(nil, ev.trailers)
		}
		return
	}
	if !r.open() {
		r.onRespPump(ev)
		return
	}
	withTrailers := ev.last && len(ev.trailers) > 0 && sendRespTrailers(pm)
	r.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocsvc.HttpBody{Body: ev.data, EndOfStream: ev.last && !withTrailers},
	}})
	if withTrailers {
		r.encoding.trailers = plainFields(ev.trailers)
		r.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_ResponseTrailers{
			ResponseTrailers: &extprocsvc.HttpTrailers{Trailers: r.encoding.trailers.toProto()},
		}})
		r.encoding.trPending = true
	}
}

func (r *run) onUpstream(ev upEvent) {
	if r.delivered {
		if ev.resp != nil && ev.resp.Body != nil {
			_ = ev.resp.Body.Close()
		}
		return
	}
	if ev.err != nil {
		r.closeStream()
		r.complete = true
		r.abort(ev.err)
		return
	}
	for ns, s := range ev.served {
		mergeNamespace(r.md, ns, s)
	}
	resp := ev.resp
	if resp.Headers == nil {
		resp.Headers = http.Header{}
	}
	r.encoding.upResp = resp
	r.encoding.hasBody = resp.Body != nil && resp.Body != http.NoBody
	r.encoding.hdrs = responseHeaderMap(resp.Status, resp.Headers)
	pm := r.cfg.ProcessingMode
	if r.complete || !sendRespHeaders(pm) {
		r.deliverResponse()
		return
	}
	if !r.open() {
		if !r.delivered {
			r.deliverResponse()
		}
		return
	}
	r.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocsvc.HttpHeaders{Headers: r.encoding.hdrs.toProto(), EndOfStream: !r.encoding.hasBody},
	}})
	r.encoding.hdrsPending = true
	r.startTimer(encode)
	if duplexResp(pm) && !r.cfg.AllowContentLengthHeader {
		r.encoding.hdrs.remove("content-length")
	}
}

// deliverResponse hands the (mutated) upstream response to the caller,
// streaming its body through the processor in FULL_DUPLEX_STREAMED mode.
func (r *run) deliverResponse() {
	up := r.encoding.upResp
	code := up.Status
	if s, ok := r.encoding.hdrs.get(":status"); ok {
		if n, err := strconv.Atoi(s); err == nil {
			code = n
		}
	}
	out := &Response{Status: code, Headers: r.encoding.hdrs.plain()}
	if r.encoding.hasBody && duplexResp(r.cfg.ProcessingMode) && !r.complete {
		out.Trailers = http.Header{}
		r.encoding.pipe = newBodyPipe(out.Trailers, func() {
			select {
			case r.readerCl <- struct{}{}:
			default:
			}
		})
		out.Body = r.encoding.pipe
		go r.pump(up.Body, func() http.Header { return up.Trailers }, r.respPump)
	} else {
		out.Body, out.Trailers = up.Body, up.Trailers
		if out.Body == nil {
			out.Body = http.NoBody
		}
		if out.Trailers == nil {
			out.Trailers = http.Header{}
		}
	}
	r.deliver(out, nil)
}
