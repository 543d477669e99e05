// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package e2e holds the end-to-end tests that drive the test data plane
// (pkg/test/dataplane, the Envoy stand-in) with pilot's own output: the
// translator's xDS (core.BuildGateway), the controller's models, and the
// in-process ADS server (pilot/pkg/xds), then send HTTP, gRPC and TLS
// traffic through the stand-in to loopback backends and EPPs.
//
// They have no build tag: `make unit` (go test -race ./...) runs them.
// They use only the stand-in's exported API (New, Run, WaitFor, Snapshot,
// Apply, Validate, Close); the tests of the stand-in itself, with
// hand-written xDS, stay in its package. Network use is loopback only.
package e2e
