// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Command demo-traffic runs `make demo-traffic` (package
// github.com/infermesh/infermesh/demo/traffic): the seed's request through
// the seed Gateway to the pod the endpoint picker chose.
//
//	demo-traffic [-repo DIR] [-requests N] [-check-privileges]
//
// It needs the Kubernetes binaries (KUBE_TEST_BINARIES, from
// hack/k8s-test-binaries.sh) and the endpoint pickers (EPP_TEST_BINARIES,
// from hack/epp-binaries.sh); hack/demo-traffic.sh provides both.
// ENVOY_BINARY runs a real Envoy as the data plane. With -check-privileges
// it only says whether this machine can make network namespaces: exit 0 if
// so, 3 (and the reason on stderr) if not.
// Exit status: 0 on success, 1 on failure, 130 when interrupted.
//
// # Files
//
//   - main.go: the flags, the privilege check, and traffic.Run with its exit
//     codes.
package main
