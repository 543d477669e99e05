// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package poll waits in tests for something asynchronous to happen: a
// collection's goroutine, a controller, an API server. Use it only where the
// asynchrony is real, never to wait out a fixed time; every wait is bounded.
//
// # Files
//
//   - poll.go: Until and UntilOr, the bounded waits with back-off.
package poll
