// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadReport reads reports in the suite's own format, written by the
// suite for other implementations (shipped in the conformance module).
func TestReadReport(t *testing.T) {
	cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	// hack/images.sh downloads the module to build the suite binary.
	dir := filepath.Join(strings.TrimSpace(string(cache)), "sigs.k8s.io", "gateway-api-inference-extension",
		"conformance@v1.6.0", "reports", "v1.5.0", "gateway")
	for _, tc := range []struct{ file, want string }{
		{"istio/1.30.1-default-gateway-report.yaml", "13 passed, 0 failed, 0 skipped"},
		{"nginx-nginx-gateway-fabric/inference-v2.6.0-report.yaml", "11 passed, 0 failed, 2 skipped"},
	} {
		st, err := readReport(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprintf("%d passed, %d failed, %d skipped", st.Passed, st.Failed, st.Skipped)
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.file, got, tc.want)
		}
	}
}
