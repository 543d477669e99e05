// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/status"
)

// failureModeAllow is Envoy's Filter::failureModeAllow: the configured
// value, but false once a FULL_DUPLEX_STREAMED body has been received in
// either direction (its bytes were handed to the processor and are gone).
func (r *run) failureModeAllow() bool {
	pm := r.cfg.ProcessingMode
	if (duplexReq(pm) && r.decoding.bodyRecv) || (duplexResp(pm) && r.encoding.bodyRecv) {
		return false
	}
	return r.cfg.FailureModeAllow
}

// onStreamEnd handles the end of the stream: OK close (io.EOF) is Envoy's
// onGrpcClose, anything else onGrpcError.
func (r *run) onStreamEnd(err error) {
	r.closeStream()
	if errors.Is(err, io.EOF) {
		if r.complete {
			return
		}
		r.complete = true
		r.continueAll()
		return
	}
	r.c.StreamsFailed.Add(1)
	if r.complete {
		return
	}
	st := status.Convert(err)
	if r.failureModeAllow() {
		r.c.FailureModeAllowed.Add(1)
		r.complete = true
		r.continueAll()
		return
	}
	r.complete = true
	r.failClosed(r.cfg.StatusOnError, fmt.Sprintf("%s_gRPC_error_%d{%s}", errorPrefix, int(st.Code()), st.Message()))
}

// continueAll is Envoy's clearAsyncState: whatever waited for the processor
// continues as it is.
func (r *run) continueAll() {
	r.stopTimers()
	if r.decoding.hdrsPending {
		r.decoding.hdrsPending = false
		r.startUpstream()
	}
	if streamedReq(r.cfg.ProcessingMode) && r.decoding.hasBody {
		r.flushReqQueue()
	}
	if r.decoding.pipe != nil && (r.decoding.last || r.decoding.trPending) {
		r.decoding.trPending = false
		r.decoding.pipe.finish(nil, r.decoding.trailersIn)
	}
	if r.encoding.hdrsPending {
		r.encoding.hdrsPending = false
		r.deliverResponse()
	}
	if r.encoding.pipe != nil && (r.encoding.last || r.encoding.trPending) {
		r.encoding.trPending = false
		r.encoding.pipe.finish(nil, r.encoding.trailersIn)
	}
}

// failClosed sends Envoy's local reply, or resets the stream when the
// response headers are already out.
func (r *run) failClosed(code int, details string) {
	r.c.LocalReplies.Add(1)
	r.stopTimers()
	r.localReply(&Response{Status: code, Headers: http.Header{}, Body: http.NoBody, Trailers: http.Header{}, Details: details}, -1)
}

// localReply sends resp as Envoy's sendLocalReply does, in gRPC form for a
// gRPC request (grpcStatus < 0: derived from the HTTP status).
func (r *run) localReply(resp *Response, grpcStatus int) {
	resp.Details = strings.Join(strings.Fields(resp.Details), "_") // Envoy replaces white space in details
	resp.Local = true
	GRPCLocalReply(r.req, resp, grpcStatus)
	// Response headers have reached the filter: Envoy sends the reply
	// directly to the codec (sendDirectLocalReply).
	resp.Direct = r.encoding.upResp != nil
	if r.delivered {
		if r.encoding.pipe != nil {
			r.encoding.pipe.finish(ErrStreamReset, nil)
		}
	} else {
		r.deliver(resp, nil)
	}
	if r.decoding.pipe != nil {
		r.decoding.pipe.finish(ErrStreamReset, nil)
	}
	if r.encoding.upResp != nil && r.encoding.pipe == nil && r.encoding.upResp.Body != nil && resp != r.encoding.upResp {
		_ = r.encoding.upResp.Body.Close()
	}
}

// Timer directions: Envoy's decoding and encoding ProcessorStates each
// have their own message timer.
const (
	decode = 0
	encode = 1
)

type msgTimer struct {
	t   *time.Timer
	gen int
}

type timerEvent struct{ dir, gen int }

// startTimer is ProcessorState::onStartProcessorCall (processor_state.cc):
// every message that expects a response (headers, each body chunk,
// trailers) starts the direction's timer afresh with message_timeout,
// except in a direction whose body mode is FULL_DUPLEX_STREAMED, which
// runs no timer.
func (r *run) startTimer(dir int) {
	pm := r.cfg.ProcessingMode
	if (dir == decode && duplexReq(pm)) || (dir == encode && duplexResp(pm)) {
		return
	}
	r.stopTimer(dir)
	g := r.state(dir).timer.gen
	r.state(dir).timer.t = time.AfterFunc(r.cfg.MessageTimeout, func() {
		select {
		case r.timerCh <- timerEvent{dir, g}:
		case <-r.done:
		}
	})
}

// stopTimer is ProcessorState::onFinishProcessorCall's stopMessageTimer:
// every response the direction accepts stops its timer, also when more
// responses are still due (a STREAMED chunk queue that is not empty); the
// next message sent starts it again.
func (r *run) stopTimer(dir int) {
	r.state(dir).timer.gen++
	if r.state(dir).timer.t != nil {
		r.state(dir).timer.t.Stop()
		r.state(dir).timer.t = nil
	}
}

func (r *run) stopTimers() {
	r.stopTimer(decode)
	r.stopTimer(encode)
}

// onTimeout is Envoy's Filter::onMessageTimeout (ext_proc.cc): with
// failure_mode_allow the processor is ignored for the rest of the request
// and everything waiting continues unmodified (clearAsyncState, which
// also hands on the STREAMED chunks still queued); otherwise 504 with
// details ext_proc_error_per-message_timeout_exceeded.
func (r *run) onTimeout(ev timerEvent) {
	if ev.gen != r.state(ev.dir).timer.gen || r.complete {
		return
	}
	r.c.MessageTimeouts.Add(1)
	r.closeStream()
	r.complete = true
	if r.failureModeAllow() {
		r.c.FailureModeAllowed.Add(1)
		r.continueAll()
		return
	}
	r.failClosed(http.StatusGatewayTimeout, errorPrefix+"_per-message_timeout_exceeded")
}

// errorResponse is Envoy's handleErrorResponse (a rejected mutation).
func (r *run) errorResponse(err error) {
	r.closeStream()
	r.complete = true
	r.failClosed(r.cfg.StatusOnError, err.Error())
}

// spurious handles a message that does not fit the state: fail open when
// allowed, else a local reply (runtime ext_proc_fail_close_spurious_resp).
func (r *run) spurious(why string) {
	r.c.SpuriousMessages.Add(1)
	r.closeStream()
	r.complete = true
	if r.failureModeAllow() {
		r.c.FailureModeAllowed.Add(1)
		r.continueAll()
		return
	}
	r.failClosed(r.cfg.StatusOnError, "spurious message: "+why)
}
