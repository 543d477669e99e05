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

// cacheBinary lays out name as hack/epp-binaries.sh leaves it under root:
// <name>-<version>/bin/<name> and <name>-<version>/VERSIONS with record (no
// VERSIONS when record is ""); it returns the binary's path.
func cacheBinary(t *testing.T, root, name, version, record string) string {
	t.Helper()
	dir := filepath.Join(root, name+"-"+version)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "bin", name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if record != "" {
		if err := os.WriteFile(filepath.Join(dir, "VERSIONS"), []byte(record), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	cacheBinary(t, dir, "lwepp", LWEPPVersion, gieModule+" "+LWEPPVersion+"\npackage "+gieModule+"/cmd/lwepp\ngo version go1.27.3 linux/amd64\n")
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// As the script leaves it: a link into the versioned folder.
	if err := os.Symlink("../lwepp-"+LWEPPVersion+"/bin/lwepp", filepath.Join(bin, "lwepp")); err != nil {
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

// A binary of another GIE release, or without the script's build record, is
// refused: the tests assert one release's behaviour.
func TestFindBinaryVersion(t *testing.T) {
	for name, tc := range map[string]struct {
		kind            Kind
		version, record string
		want            string
	}{
		"lwepp of another release": {LWEPP, "v1.6.0", gieModule + " v1.6.0\n", `built from "` + gieModule + ` v1.6.0"`},
		"epp of another release":   {FullEPP, "v1.1.0", gieModule + " v1.1.0\n", "want " + gieModule + " " + FullEPPVersion},
		"no build record":          {LWEPP, LWEPPVersion, "", "has no build record"},
		"another module":           {LWEPP, LWEPPVersion, "example.com/lwepp " + LWEPPVersion + "\n", "example.com/lwepp"},
		"an empty record":          {FullEPP, FullEPPVersion, "\n", "want " + gieModule},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := cacheBinary(t, dir, string(tc.kind), tc.version, tc.record)
			_, err := findBinary(tc.kind, env(map[string]string{BinariesEnv: filepath.Dir(p)}))
			if !errors.Is(err, errWrongVersion) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "hack/epp-binaries.sh") {
				t.Errorf("%v, want errWrongVersion naming the script and %q", err, tc.want)
			}
		})
	}
	// Both of this checkout's releases, unlinked: found.
	dir := t.TempDir()
	for _, k := range []Kind{LWEPP, FullEPP} {
		p := cacheBinary(t, dir, string(k), k.version(), gieModule+" "+k.version()+"\n")
		if got, err := findBinary(k, env(map[string]string{BinariesEnv: filepath.Dir(p)})); err != nil || got != p {
			t.Errorf("%s: %q, %v; want %q", k, got, err, p)
		}
	}
}
