// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package version holds the build's version, set at link time with
// -ldflags "-X github.com/infermesh/infermesh/pkg/version.Version=...".
package version

// Version is the release or git description of this build; "dev" when built
// without the Makefile.
var Version = "dev"
