// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package leaderelection decides which pilot-discovery replica writes to the
// API server. Every replica computes state and serves xDS; only the holder of a
// coordination.k8s.io/v1 Lease runs the writers (shadow Services, statuses,
// Gateway deployments). Writers are level-triggered and idempotent, so a new
// leader converges from whatever it finds.
//
// It wraps client-go's tools/leaderelection with two additions: it campaigns
// again after losing the lease (until its context ends), and on shutdown it
// stops the writers and waits for them to return before it releases the Lease
// (client-go's ReleaseOnCancel alone would release it while a write may still
// be in flight).
//
// # Files
//
//   - leaderelection.go: Config and Elector: the campaign for the Lease, again
//     after each loss, and the registered functions run while leading and
//     stopped before the Lease is released.
package leaderelection
