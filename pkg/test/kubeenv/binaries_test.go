// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultBinaryDir(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HOME": "/h"}, "/h/.cache/infermesh/k8s/" + KubernetesVersion + "/bin"},
		{map[string]string{"HOME": "/h", "XDG_CACHE_HOME": "/x"}, "/x/infermesh/k8s/" + KubernetesVersion + "/bin"},
		{map[string]string{"HOME": "/h", "XDG_CACHE_HOME": "/x", "INFERMESH_CACHE": "/c"}, "/c/k8s/" + KubernetesVersion + "/bin"},
	} {
		if got := defaultBinaryDir(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("defaultBinaryDir(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

func TestFindBinaries(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{BinariesEnv: dir}
	getenv := func(k string) string { return env[k] }

	_, err := findBinaries("", binaryNames, getenv)
	if !errors.Is(err, errNoBinaries) || !strings.Contains(err.Error(), "hack/k8s-test-binaries.sh") {
		t.Fatalf("empty folder: err = %v, want errNoBinaries naming the script", err)
	}
	for _, name := range binaryNames {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := findBinaries("", binaryNames, getenv); err != nil || got != dir {
		t.Fatalf("findBinaries = %q, %v; want %q", got, err, dir)
	}
	if _, err := findBinaries(t.TempDir(), binaryNames, getenv); !errors.Is(err, errNoBinaries) {
		t.Fatalf("an explicit empty folder must win over %s: err = %v", BinariesEnv, err)
	}
	// A folder cached before kube-scheduler was added serves Start, but not
	// Start with WithScheduler, and the error names the missing binary.
	_, err = findBinaries("", append(binaryNames, schedulerBinary), getenv)
	if !errors.Is(err, errNoBinaries) || !strings.Contains(err.Error(), schedulerBinary) {
		t.Fatalf("folder without %s: err = %v, want errNoBinaries naming it", schedulerBinary, err)
	}
}
