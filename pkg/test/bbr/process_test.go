// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package bbr

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestFindBinary: an unset variable, a missing file and a file that is
// not executable each fail naming the script; an executable is found.
func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == BinariesEnv {
				return v
			}
			return ""
		}
	}
	if _, err := findBinary(env("")); !errors.Is(err, errNoBinary) {
		t.Errorf("unset: %v", err)
	}
	if _, err := findBinary(env(dir)); !errors.Is(err, errNoBinary) {
		t.Errorf("missing: %v", err)
	}
	p := filepath.Join(dir, "bbr")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findBinary(env(dir)); !errors.Is(err, errNoBinary) {
		t.Errorf("not executable: %v", err)
	}
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findBinary(env(dir)); err != nil || got != p {
		t.Errorf("executable: %q, %v", got, err)
	}
}
