// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"errors"

	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// STREAMED request bodies with send_body_without_waiting_for_header_response,
// as Envoy's ext_proc filter handles them
// (source/extensions/filters/http/ext_proc/ext_proc.cc: Filter::onData,
// handleDataStreamedModeBase; processor_state.cc: handleHeadersResponse,
// getCallbackStateAfterHeaderResp, handleBodyResponse,
// handleStreamedBodyResponse, finalizeBodyResponse, clearAsyncState):
//
//   - each chunk the filter receives is sent at once as request_body (the
//     last with end_of_stream, unless trailers end the body) and kept in a
//     queue; the upstream sees none of it until the processor answers for
//     that chunk. Sending a chunk starts the decode timer afresh, and while
//     the headers response is pending the state stays "headers" (a chunk
//     sent then does not make a body response acceptable);
//   - the request headers response is accepted only while it is pending.
//     Then: if the whole body has reached the filter and chunks await
//     their responses, the headers wait for the response to the last chunk
//     (holdsHeadersForBody); otherwise the request continues upstream and
//     later chunks follow as they are answered;
//   - a body response is accepted only after the headers response and only
//     while a chunk awaits one (ProcessorState::isValidBodyCallbackState):
//     one before the headers response, or with no chunk outstanding, is a
//     spurious message (the header-before-body order the proto requires of
//     the server: "the header-body ordering must always be maintained",
//     ExternalProcessor.send_body_without_waiting_for_header_response). A
//     streamed_response in it is spurious too ("streamed_response is
//     received while body_mode_ is not FULL_DUPLEX_STREAMED");
//   - the answered chunk leaves the queue with the body mutation applied
//     (MutationUtils::applyBodyMutations: body replaces the chunk,
//     clear_body empties it, no mutation leaves it unchanged) and goes
//     upstream; every accepted response stops the decode timer, even with
//     chunks still queued;
//   - failure_mode_allow is honoured throughout (Filter::failureModeAllow
//     turns it off only for FULL_DUPLEX_STREAMED): a failure hands every
//     queued chunk on unchanged (clearAsyncState) and the request goes on.
//
// Stricter than Envoy: a header_mutation or CONTINUE_AND_REPLACE in a
// STREAMED body response is refused with status_on_error (Envoy ignores
// both there).
type queuedChunk struct {
	data []byte
	last bool // the body's last chunk (end_of_stream, or trailers follow)
}

var errBodyHeaderMutation = errors.New("header_mutation in a STREAMED body response is not implemented by the test data plane")

// sendStreamedChunk sends one request body chunk and queues it
// (handleDataStreamedModeBase).
func (r *run) sendStreamedChunk(ev pumpEvent) {
	eos := ev.last && len(ev.trailers) == 0
	r.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_RequestBody{
		RequestBody: &extprocsvc.HttpBody{Body: ev.data, EndOfStream: eos},
	}})
	r.decoding.queue = append(r.decoding.queue, queuedChunk{data: ev.data, last: ev.last})
	r.startTimer(decode)
}

// holdsHeadersForBody: after the headers response, the request waits for
// the body response to its last chunk when the whole body has already
// reached the filter and chunks are still queued (handleHeadersResponse,
// complete_body_available_ with the state StreamedBodyCallback).
func (r *run) holdsHeadersForBody() bool {
	return r.decoding.hasBody && r.decoding.last && len(r.decoding.queue) > 0
}

// onStreamedBodyResponse handles a request body response in STREAMED mode.
func (r *run) onStreamedBodyResponse(m *extprocsvc.ProcessingResponse, b *extprocsvc.BodyResponse) {
	if r.decoding.hdrsPending || len(r.decoding.queue) == 0 {
		r.spurious("request body")
		return
	}
	cr := b.GetResponse()
	if cr.GetBodyMutation().GetStreamedResponse() != nil {
		r.spurious("streamed_response is received while body_mode_ is not FULL_DUPLEX_STREAMED")
		return
	}
	switch {
	case cr.GetHeaderMutation() != nil:
		r.errorResponse(errBodyHeaderMutation)
		return
	case cr.GetStatus() == extprocsvc.CommonResponse_CONTINUE_AND_REPLACE:
		r.errorResponse(errReplace)
		return
	}
	r.setMetadata(m.GetDynamicMetadata())
	r.stopTimer(decode)
	chunk := r.decoding.queue[0]
	r.decoding.queue = r.decoding.queue[1:]
	r.injectReq(applyBodyMutation(cr.GetBodyMutation(), chunk.data))
	if chunk.last {
		r.startUpstream() // finalizeBodyResponse: the last chunk continues the request
	}
	r.endReqBodyIfDone()
}

// applyBodyMutation is MutationUtils::applyBodyMutations on one chunk.
func applyBodyMutation(bm *extprocsvc.BodyMutation, data []byte) []byte {
	switch {
	case bm.GetClearBody():
		return nil
	case bm.GetBody() != nil:
		return bm.GetBody()
	}
	return data
}

// injectReq passes processed body data on: to the upstream when it has
// started, else held until it does.
func (r *run) injectReq(b []byte) {
	if r.decoding.pipe != nil {
		r.decoding.pipe.write(b)
		return
	}
	r.decoding.held = append(r.decoding.held, b)
}

// endReqBodyIfDone ends the upstream body once the last chunk has been
// answered (with the trailers, which Envoy held meanwhile: onTrailers).
func (r *run) endReqBodyIfDone() {
	if r.decoding.last && len(r.decoding.queue) == 0 && r.decoding.pipe != nil {
		r.decoding.pipe.finish(nil, r.decoding.trailersIn)
	}
}

// flushReqQueue is ProcessorState::clearAsyncState for the request: the
// queued chunks go on unchanged and the request continues.
func (r *run) flushReqQueue() {
	for _, c := range r.decoding.queue {
		r.injectReq(c.data)
	}
	r.decoding.queue = nil
	r.startUpstream()
	r.endReqBodyIfDone()
}
