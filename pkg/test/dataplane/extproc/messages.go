// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"errors"
	"net/http"
	"strconv"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

var errReplace = errors.New("CONTINUE_AND_REPLACE is not implemented by the test data plane")

// onMessage is Envoy's onReceiveMessage for one processor response.
func (r *run) onMessage(m *extprocsvc.ProcessingResponse) {
	if r.complete {
		return // messages after processing completed are ignored
	}
	if m.GetOverrideMessageTimeout() != nil {
		// Envoy only extends the timer within max_message_timeout, which
		// this package leaves unset (0): the request is ignored.
		return
	}
	pm := r.cfg.ProcessingMode
	switch v := m.GetResponse().(type) {
	case *extprocsvc.ProcessingResponse_RequestHeaders:
		if !r.decoding.hdrsPending {
			r.spurious("request headers")
			return
		}
		r.setMetadata(m.GetDynamicMetadata())
		r.stopTimer(decode)
		cr := v.RequestHeaders.GetResponse()
		if cr.GetStatus() == extprocsvc.CommonResponse_CONTINUE_AND_REPLACE {
			r.errorResponse(errReplace)
			return
		}
		if err := applyHeaderMutation(cr.GetHeaderMutation(), &r.decoding.hdrs, r.cfg.MutationRules, r.c); err != nil {
			r.errorResponse(err)
			return
		}
		r.clearRouteCache(cr)
		// In FULL_DUPLEX_STREAMED the body may change length: Envoy drops
		// content-length after applying the processor's header mutation too
		// (a processor that echoes every header would put it back).
		if reqBodyToProcessor(pm) && !r.cfg.AllowContentLengthHeader {
			r.decoding.hdrs.remove("content-length")
		}
		r.decoding.hdrsPending = false
		if streamedReq(pm) && r.holdsHeadersForBody() {
			return
		}
		r.startUpstream()

	case *extprocsvc.ProcessingResponse_RequestBody:
		if streamedReq(pm) {
			r.onStreamedBodyResponse(m, v.RequestBody)
			return
		}
		if r.decoding.pipe == nil || r.decoding.pipe.finished() || !duplexReq(pm) {
			r.spurious("request body")
			return
		}
		sr := v.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			r.spurious("normal body mutation response while body mode is FULL_DUPLEX_STREAMED")
			return
		}
		r.setMetadata(m.GetDynamicMetadata())
		r.decoding.pipe.write(sr.GetBody())
		if sr.GetEndOfStream() && !r.decoding.trPending {
			r.decoding.pipe.finish(nil, r.decoding.trailersIn)
		}

	case *extprocsvc.ProcessingResponse_RequestTrailers:
		if !r.decoding.trPending {
			r.spurious("request trailers")
			return
		}
		r.setMetadata(m.GetDynamicMetadata())
		if err := applyHeaderMutation(v.RequestTrailers.GetHeaderMutation(), &r.decoding.trailers, r.cfg.MutationRules, r.c); err != nil {
			r.errorResponse(err)
			return
		}
		r.decoding.trPending = false
		r.decoding.pipe.finish(nil, r.decoding.trailers.plain())

	case *extprocsvc.ProcessingResponse_ResponseHeaders:
		if !r.encoding.hdrsPending {
			r.spurious("response headers")
			return
		}
		r.setMetadata(m.GetDynamicMetadata())
		r.stopTimer(encode)
		cr := v.ResponseHeaders.GetResponse()
		if cr.GetStatus() == extprocsvc.CommonResponse_CONTINUE_AND_REPLACE {
			r.errorResponse(errReplace)
			return
		}
		if err := applyHeaderMutation(cr.GetHeaderMutation(), &r.encoding.hdrs, r.cfg.MutationRules, r.c); err != nil {
			r.errorResponse(err)
			return
		}
		// As for the request: no content-length after the mutation.
		if duplexResp(pm) && !r.cfg.AllowContentLengthHeader {
			r.encoding.hdrs.remove("content-length")
		}
		r.encoding.hdrsPending = false
		r.deliverResponse()

	case *extprocsvc.ProcessingResponse_ResponseBody:
		if r.encoding.pipe == nil || r.encoding.pipe.finished() || !duplexResp(pm) {
			r.spurious("response body")
			return
		}
		sr := v.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			r.spurious("normal body mutation response while body mode is FULL_DUPLEX_STREAMED")
			return
		}
		r.setMetadata(m.GetDynamicMetadata())
		r.encoding.pipe.write(sr.GetBody())
		if sr.GetEndOfStream() && !r.encoding.trPending {
			r.encoding.pipe.finish(nil, r.encoding.trailersIn)
		}

	case *extprocsvc.ProcessingResponse_ResponseTrailers:
		if !r.encoding.trPending {
			r.spurious("response trailers")
			return
		}
		r.setMetadata(m.GetDynamicMetadata())
		if err := applyHeaderMutation(v.ResponseTrailers.GetHeaderMutation(), &r.encoding.trailers, r.cfg.MutationRules, r.c); err != nil {
			r.errorResponse(err)
			return
		}
		r.encoding.trPending = false
		r.encoding.pipe.finish(nil, r.encoding.trailers.plain())

	case *extprocsvc.ProcessingResponse_ImmediateResponse:
		r.setMetadata(m.GetDynamicMetadata())
		r.immediate(v.ImmediateResponse)

	default:
		r.spurious("unhandled message")
	}
}

// immediate is Envoy's sendImmediateResponse: a local reply with the
// processor's status (200 when unset or below 200), header mutations under
// permissive rules, and body; nothing more is sent to the processor. The
// mutation is the local reply's modify_headers, so it runs before
// prepareLocalReply sets the body's content-length and content-type
// (Filter::sendImmediateResponse in
// source/extensions/filters/http/ext_proc/ext_proc.cc;
// SetLocalReplyBodyHeaders).
func (r *run) immediate(ir *extprocsvc.ImmediateResponse) {
	r.c.ImmediateResponses.Add(1)
	r.closeStream()
	r.complete = true
	r.stopTimers()
	code := int(ir.GetStatus().GetCode())
	if code < 200 {
		code = 200
	}
	hm := headerMap{{":status", strconv.Itoa(code)}}
	if err := applyHeaderMutation(ir.GetHeaders(), &hm, immediateRules, r.c); err != nil {
		r.c.RejectedHeaderMutations.Add(1) // Envoy logs and sends the reply anyway
	}
	resp := &Response{Status: code, Headers: hm.plain(), Trailers: http.Header{}, Details: ir.GetDetails()}
	SetLocalReplyBodyHeaders(resp.Headers, len(ir.GetBody()))
	if s, ok := hm.get(":status"); ok {
		if n, err := strconv.Atoi(s); err == nil {
			resp.Status = n
		}
	}
	resp.Body = http.NoBody
	if len(ir.GetBody()) > 0 {
		resp.Body = newStaticBody(ir.GetBody())
	}
	grpcStatus := -1 // ImmediateResponse.grpc_status, else from the HTTP status
	if gs := ir.GetGrpcStatus(); gs != nil {
		grpcStatus = int(gs.GetStatus())
	}
	r.localReply(resp, grpcStatus)
}

// clearRouteCache is DecodingProcessorState::clearRouteCache
// (processor_state.cc) for a request headers response: only a response
// with a header_mutation (even an empty one) clears the route cache; then
// route_cache_action DEFAULT clears it when clear_route_cache is set,
// CLEAR always, RETAIN never. The router selects the route again for the
// request the upstream gets (Request.RouteCacheCleared).
func (r *run) clearRouteCache(cr *extprocsvc.CommonResponse) {
	if cr.GetHeaderMutation() == nil {
		return
	}
	switch r.cfg.RouteCacheAction {
	case extprocv3.ExternalProcessor_DEFAULT:
		r.routeCacheCleared = r.routeCacheCleared || cr.GetClearRouteCache()
	case extprocv3.ExternalProcessor_CLEAR:
		r.routeCacheCleared = true
	}
}
