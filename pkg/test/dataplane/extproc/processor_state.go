// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"net/http"
	"time"
)

// processorState is what Envoy's ext_proc filter keeps per direction in a
// ProcessorState (source/extensions/filters/http/ext_proc/
// processor_state.h): the headers sent and whether their response is
// awaited, the body's progress, the trailers, and the direction's
// per-message timer.
type processorState struct {
	hdrs        headerMap
	hdrsPending bool // headers sent, their response awaited
	hasBody     bool
	bodyRecv    bool
	pipe        *bodyPipe
	last        bool // the body's last chunk has been read
	trailersIn  http.Header
	trPending   bool // trailers sent, their response awaited
	trailers    headerMap
	timer       msgTimer
}

// decodingState is the request direction (Envoy's DecodingProcessorState).
type decodingState struct {
	processorState
	gate      bool        // processor events are handled once the body (if any) has reached the filter
	gateTimer *time.Timer // opens the gate for a body held back longer than heldBodyGrace
	upStarted bool
	// STREAMED request body (streamed.go): chunks sent and awaiting their
	// body response, in order (Envoy's ChunkQueue), and processed data
	// that reached the filter before the upstream started.
	queue []queuedChunk
	held  [][]byte
}

// encodingState is the response direction (Envoy's
// EncodingProcessorState): the upstream's response as the router gave it,
// then what the processor made of it.
type encodingState struct {
	processorState
	upResp *Response
}

// state is the ProcessorState of direction dir (decode or encode).
func (r *run) state(dir int) *processorState {
	if dir == decode {
		return &r.decoding.processorState
	}
	return &r.encoding.processorState
}
