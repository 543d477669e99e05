// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package epp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "store", "lwepp")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// As the script leaves it: a link into the versioned folder.
	if err := os.Symlink("../store/lwepp", filepath.Join(bin, "lwepp")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "epp"), []byte("not executable"), 0o644); err != nil {
		t.Fatal(err)
	}

	got, err := findBinary(LWEPP, env(map[string]string{BinariesEnv: bin}))
	if err != nil || got != filepath.Join(bin, "lwepp") {
		t.Fatalf("lwepp: %q, %v", got, err)
	}
	for name, tc := range map[string]struct {
		kind Kind
		vars map[string]string
		want string
	}{
		"unset":          {LWEPP, nil, BinariesEnv + " is not set"},
		"missing":        {LWEPP, map[string]string{BinariesEnv: dir}, "lwepp:"},
		"not executable": {FullEPP, map[string]string{BinariesEnv: bin}, "not an executable"},
	} {
		_, err := findBinary(tc.kind, env(tc.vars))
		if !errors.Is(err, errNoBinary) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "hack/epp-binaries.sh") {
			t.Errorf("%s: %v, want errNoBinary naming the script and %q", name, err, tc.want)
		}
	}
	if _, err := findBinary("nope", env(map[string]string{BinariesEnv: bin})); err == nil || errors.Is(err, errNoBinary) {
		t.Errorf("unknown kind: %v", err)
	}
}
