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
	if (duplexReq(pm) && r.reqBodyRecv) || (duplexResp(pm) && r.respBodyRecv) {
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
	r.stopTimer()
	if r.reqHdrsPending {
		r.reqHdrsPending = false
		r.startUpstream()
	}
	if r.reqPipe != nil && (r.reqLast || r.reqTrPending) {
		r.reqTrPending = false
		r.reqPipe.finish(nil, r.reqTrailersIn)
	}
	if r.respHdrsPending {
		r.respHdrsPending = false
		r.deliverResponse()
	}
	if r.respPipe != nil && (r.respLast || r.respTrPending) {
		r.respTrPending = false
		r.respPipe.finish(nil, r.respTrailersIn)
	}
}

// failClosed sends Envoy's local reply, or resets the stream when the
// response headers are already out.
func (r *run) failClosed(code int, details string) {
	r.c.LocalReplies.Add(1)
	r.stopTimer()
	r.localReply(&Response{Status: code, Headers: http.Header{}, Body: http.NoBody, Trailers: http.Header{}, Details: details})
}

func (r *run) localReply(resp *Response) {
	resp.Details = strings.Join(strings.Fields(resp.Details), "_") // Envoy replaces white space in details
	// Response headers have reached the filter: Envoy sends the reply
	// directly to the codec (sendDirectLocalReply).
	resp.Direct = r.upResp != nil
	if r.delivered {
		if r.respPipe != nil {
			r.respPipe.finish(ErrStreamReset, nil)
		}
	} else {
		r.deliver(resp, nil)
	}
	if r.reqPipe != nil {
		r.reqPipe.finish(ErrStreamReset, nil)
	}
	if r.upResp != nil && r.respPipe == nil && r.upResp.Body != nil && resp != r.upResp {
		_ = r.upResp.Body.Close()
	}
}

func (r *run) startTimer() {
	pm := r.cfg.ProcessingMode
	if duplexReq(pm) || duplexResp(pm) {
		return // no per-message timeout in FULL_DUPLEX_STREAMED mode
	}
	r.stopTimer()
	g := r.timerGen
	r.timer = time.AfterFunc(r.cfg.MessageTimeout, func() {
		select {
		case r.timerCh <- g:
		case <-r.done:
		}
	})
}

func (r *run) stopTimer() {
	r.timerGen++
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// onTimeout is Envoy's onMessageTimeout: 504 unless failures are allowed.
func (r *run) onTimeout(g int) {
	if g != r.timerGen || r.complete {
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
