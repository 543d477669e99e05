// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package gwproxy runs a Gateway's proxy for tests and the traffic demo,
// booted from the bootstrap that our Gateway controller writes into the
// Gateway's ConfigMap: the test data plane (pkg/test/dataplane, in
// process) or, given its path, a real Envoy binary. Both serve the
// Gateway's listener on the host's loopback and are stopped by the test's
// cleanup.
//
// # Files
//
//   - gwproxy.go: Proxy and its two kinds: DataPlane (the stand-in in process)
//     and Envoy (a real binary, its endpoints read from the admin page).
package gwproxy
