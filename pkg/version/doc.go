// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package version holds the build's version, set at link time with
// -ldflags "-X github.com/infermesh/infermesh/pkg/version.Version=..." (the
// Makefile does), or else taken from what the Go toolchain recorded in the
// binary: the module version of a `go install ...@version` build, or the
// VCS revision of a build in a checkout.
//
// # Files
//
//   - version.go: Version, from the linker flag or else from the binary's build
//     information.
package version
