// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build ignore

// Command testlist prints what the Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance) knows about its tests and
// conformance profiles, as tab-separated lines, so the harness can count
// Go's per-test verdicts by profile (verdicts.go, ReadTestList) without
// importing the suite's module into ours:
//
//	profile	<name>	core|extended	<feature>,<feature>,...
//	test	<ShortName>	<parallel>	<provisional>	<feature>,<feature>,...
//
// Profiles are the suite's exported ConformanceProfile variables; tests
// are tests.ConformanceTests in the suite's own order. It is built only
// by hack/images.sh, which copies main.go into the throwaway module that
// builds the suite's test binary at the same version (hence the ignore tag
// on both files: our module does not require the suite's), and its output
// is cached beside that binary as tests.tsv.
//
// # Files
//
//   - main.go: the whole command; the one file hack/images.sh copies and runs.
package main
