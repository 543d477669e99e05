// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package bootstrap assembles pilot-discovery's four stages: the input
// collections (1: a kube.Client's informers in a cluster, or a file.Source's
// static collections in file mode), the Gateway API and InferencePool
// controller (2: with its leader-gated writers in a cluster; computed and
// never written in file mode), the service registry and the per-Gateway
// xDS translation (3), and the ADS server with its monitoring and debug
// endpoints (4). architecture/README.md draws the flow.
//
// Not to be confused with pkg/bootstrap, which renders the Envoy bootstrap
// of a Gateway's proxy.
//
// # Files
//
//   - server.go: Args, Server, NewServer and Run: the cluster-mode wiring,
//     leader election, and the memory handed back once the first configuration
//     is published.
//   - files.go: fileMode, stages 2 and 3 over a folder's manifests, with the
//     shadow Services and EndpointSlices the cluster would have added.
//   - http.go: the debug and monitoring HTTP handlers, and the filter that
//     keeps /debug off the monitoring port.
//   - binarypages_linux.go: dropping the executable's clean read-only pages
//     after startup, and the process's CPU time (Linux).
//   - binarypages_other.go: the no-op versions of the above for other systems.
package bootstrap
