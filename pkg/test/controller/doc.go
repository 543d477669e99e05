// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package controller runs the Gateway API and InferencePool controller
// (pilot/pkg/config/kube/gateway), or all of pilot-discovery, in process for
// integration tests and benchmarks, always leading, until the test ends.
//
// # Files
//
//   - controller.go: Start, the controller alone against a cluster.
//   - pilot.go: StartPilot and GatewayPilot, all of pilot-discovery in process
//     (restartable on the same ADS address), and ProxyNode, the node a
//     Gateway's proxy presents.
package controller
