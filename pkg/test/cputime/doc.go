// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package cputime reads the CPU time a benchmark's process has used, for
// benchmarks that report it beside ns/op.
//
// # Files
//
//   - cputime.go: Process, the user and system CPU time of the whole process.
package cputime
