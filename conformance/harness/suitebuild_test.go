// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestGatewayAPIVersion: the CRD version comes from the suite binary's
// own gateway-api module, after a replacement; a missing module or a
// folder replacement is an error, never a guess.
func TestGatewayAPIVersion(t *testing.T) {
	dep := func(path, version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: path, Version: version, Replace: replace}
	}
	for _, c := range []struct {
		name    string
		bi      debug.BuildInfo
		want    string
		wantErr bool
	}{
		{"gie suite", debug.BuildInfo{Main: debug.Module{Path: "infermesh.test/images/gie-conformance.test"},
			Deps: []*debug.Module{dep("sigs.k8s.io/gateway-api-inference-extension/conformance", "v1.6.0", nil),
				dep("sigs.k8s.io/gateway-api", "v1.6.1", nil)}}, "v1.6.1", false},
		{"replaced", debug.BuildInfo{Deps: []*debug.Module{dep("sigs.k8s.io/gateway-api", "v1.6.0",
			dep("sigs.k8s.io/gateway-api", "v1.7.0", nil))}}, "v1.7.0", false},
		{"folder", debug.BuildInfo{Deps: []*debug.Module{dep("sigs.k8s.io/gateway-api", "v0.0.0",
			dep("../", "", nil))}}, "", true},
		{"missing", debug.BuildInfo{Deps: []*debug.Module{dep("sigs.k8s.io/gateway-api/conformance", "v1.7.0", nil)}}, "", true},
		{"devel main", debug.BuildInfo{Main: debug.Module{Path: "sigs.k8s.io/gateway-api", Version: "(devel)"}}, "", true},
	} {
		got, err := gatewayAPIVersion(&c.bi)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%s: got %q, %v; want %q, error %t", c.name, got, err, c.want, c.wantErr)
		}
	}
}

// TestSuiteGatewayAPIVersionNotABinary: a file that is no Go binary is an
// error naming it.
func TestSuiteGatewayAPIVersionNotABinary(t *testing.T) {
	p := t.TempDir() + "/suite.test"
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := SuiteGatewayAPIVersion(p); err == nil {
		t.Error("no error for a shell script")
	}
}
