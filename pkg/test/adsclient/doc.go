// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package adsclient is the one ADS client of the tests and benchmarks: a
// proxy's side of an AggregatedDiscoveryService stream, state of the world
// (SotW) or incremental (Delta), driven by hand. A test dials (plaintext,
// or TLS trusting a CA pool), opens a stream for a node (optionally with
// "authorization: Bearer <token>" metadata, as pilot-discovery's
// --xds-auth=serviceaccount expects), requests or subscribes, reads each
// response with a bounded wait, ACKs or NACKs it (with the error detail a
// proxy sends), and checks that nothing arrives for a while (Quiet). Typed
// helpers decode the resources of a response.
//
// Every wait is bounded: Recv and Quiet take a duration, a stream's context
// ends at the test's cleanup (or sooner, Within), and the goroutine that
// reads the stream ends with it. Errors are returned, never fatal, so a
// stream can be driven from a benchmark's own goroutines; NewSotW and
// NewDelta are the test-scoped openers that fail the test and register the
// cleanup.
//
// The test data plane (pkg/test/dataplane) has its own xDS client: it is
// the Envoy stand-in, not a test client, and follows Envoy instead.
//
// # Files
//
//   - dial.go: Dial and its options (TLS with a CA pool, the largest
//     message received).
//   - stream.go: what both stream kinds share: the openers (OpenSotW,
//     NewSotW, OpenDelta, NewDelta), the stream options (Token, Within,
//     WaitForReady, AutoACK, NodeOnFirstOnly, Buffer), and the reading
//     goroutine behind Send, Recv/RecvAt with a bounded wait, Quiet,
//     Drain, Last, Node, CloseSend and Close.
//   - sotw.go: SotW, a StreamAggregatedResources stream: Request, ACK and
//     NACK repeating the type's requested names.
//   - delta.go: Delta, a DeltaAggregatedResources stream: Subscribe, ACK
//     and NACK.
//   - decode.go: Clusters, Listeners, Assignments, RouteConfigurations,
//     Secrets (typed resources of a response), Resources (a delta
//     response's Anys), Addresses (an assignment's endpoints) and Validate
//     (ValidateAll on a resource and every Any inside it).
package adsclient
