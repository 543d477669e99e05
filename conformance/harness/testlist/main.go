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
// by hack/images.sh, in the throwaway module that builds the suite's test
// binary at the same version (hence the ignore tag: our module does not
// require the suite's), and its output is cached beside that binary as
// tests.tsv.
package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

func main() {
	w := bufio.NewWriter(os.Stdout)
	for _, p := range []suite.ConformanceProfile{
		suite.GatewayHTTPConformanceProfile, suite.GatewayTLSConformanceProfile,
		suite.GatewayTCPConformanceProfile, suite.GatewayUDPConformanceProfile,
		suite.GatewayGRPCConformanceProfile, suite.MeshHTTPConformanceProfile,
		suite.MeshGRPCConformanceProfile,
	} {
		fmt.Fprintf(w, "profile\t%s\tcore\t%s\n", p.Name, names(sets.List(p.CoreFeatures)))
		fmt.Fprintf(w, "profile\t%s\textended\t%s\n", p.Name, names(sets.List(p.ExtendedFeatures)))
	}
	for _, t := range tests.ConformanceTests {
		fmt.Fprintf(w, "test\t%s\t%t\t%t\t%s\n", t.ShortName, t.Parallel, t.Provisional, names(t.Features))
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "testlist:", err)
		os.Exit(1)
	}
}

func names(fs []features.FeatureName) string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, string(f))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
