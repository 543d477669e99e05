// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import "sync/atomic"

// Counters mirror the ext_proc filter's statistics (Envoy's
// http.<prefix>.ext_proc.* counters) that the tests look at. All fields are
// safe for concurrent use.
type Counters struct {
	// StreamsStarted counts gRPC streams opened (streams_started).
	StreamsStarted atomic.Int64
	// StreamsFailed counts streams that ended with a gRPC error or could not
	// be opened (streams_failed).
	StreamsFailed atomic.Int64
	// FailureModeAllowed counts failures that failure_mode_allow turned into
	// "continue unmodified" (failure_mode_allowed).
	FailureModeAllowed atomic.Int64
	// ImmediateResponses counts ImmediateResponse messages honoured.
	ImmediateResponses atomic.Int64
	// LocalReplies counts error local replies (500/504) sent because a
	// failure was not allowed.
	LocalReplies atomic.Int64
	// SpuriousMessages counts out-of-order or wrong-kind messages
	// (spurious_msgs_received).
	SpuriousMessages atomic.Int64
	// RejectedHeaderMutations counts header mutations ignored or refused by
	// the mutation rules (rejected_header_mutations).
	RejectedHeaderMutations atomic.Int64
	// MessageTimeouts counts per-message timeouts (message_timeouts).
	MessageTimeouts atomic.Int64
}

// DefaultCounters receives the counts of every Process call whose Config has
// no Counters of its own.
var DefaultCounters = &Counters{}
