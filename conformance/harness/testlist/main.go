// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build ignore

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
