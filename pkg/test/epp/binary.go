// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package epp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Kind names an endpoint picker; it is also the binary's file name.
type Kind string

const (
	// LWEPP is the lightweight endpoint picker, GIE LWEPPVersion cmd/lwepp:
	// round robin over ready pods, no metrics.
	LWEPP Kind = "lwepp"
	// FullEPP is the full, metrics-aware endpoint picker, GIE FullEPPVersion
	// cmd/epp.
	FullEPP Kind = "epp"
)

// The GIE releases hack/epp-binaries.sh builds by default.
const (
	LWEPPVersion   = "v1.6.2"
	FullEPPVersion = "v1.0.0"
)

// BinariesEnv names the environment variable pointing at the folder that holds
// the lwepp and epp binaries: the folder hack/epp-binaries.sh prints.
const BinariesEnv = "EPP_TEST_BINARIES"

// errNoBinary is wrapped by findBinary when the binary cannot be used.
var errNoBinary = errors.New("epp: endpoint picker binary not found; build it with hack/epp-binaries.sh (or `make integ`) and set " +
	BinariesEnv + " to the folder it prints")

// errWrongVersion is wrapped by findBinary when the binary was built from
// another GIE release than the tests of this checkout are written for.
var errWrongVersion = errors.New("epp: endpoint picker binary of another GIE release; run hack/epp-binaries.sh (or `make integ`) and set " +
	BinariesEnv + " to the folder it prints")

// gieModule is the module hack/epp-binaries.sh builds both EPPs from.
const gieModule = "sigs.k8s.io/gateway-api-inference-extension"

// version is the GIE release the tests of this checkout expect of k.
func (k Kind) version() string {
	if k == LWEPP {
		return LWEPPVersion
	}
	return FullEPPVersion
}

// Binary returns the path of kind's binary in $EPP_TEST_BINARIES. It fails the
// test, never skips it, when the variable is unset, the binary is missing, or
// it was built from another GIE release than [LWEPPVersion] or
// [FullEPPVersion] (its build record says so: VERSIONS, which
// hack/epp-binaries.sh writes beside the binary's bin folder, first line
// "sigs.k8s.io/gateway-api-inference-extension <version>"), naming
// hack/epp-binaries.sh. So a folder of another checkout's versions is refused
// before a test asserts one release's behaviour of another.
func Binary(t testing.TB, k Kind) string {
	t.Helper()
	p, err := findBinary(k, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// findBinary is Binary with the environment injected.
func findBinary(k Kind, getenv func(string) string) (string, error) {
	if k != LWEPP && k != FullEPP {
		return "", fmt.Errorf("epp: unknown kind %q (want %q or %q)", k, LWEPP, FullEPP)
	}
	dir := getenv(BinariesEnv)
	if dir == "" {
		return "", fmt.Errorf("%w: %s is not set", errNoBinary, BinariesEnv)
	}
	p := filepath.Join(dir, string(k))
	st, err := os.Stat(p) // follows the script's symbolic links
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", errNoBinary, k, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s is not an executable file", errNoBinary, p)
	}
	if err := checkVersion(p, k.version()); err != nil {
		return "", err
	}
	return p, nil
}

// checkVersion reads the build record of the binary at p (after its
// symbolic links: <name>-<version>/bin/<name> has <name>-<version>/VERSIONS)
// and fails unless it names the GIE module at want.
func checkVersion(p, want string) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("%w: %v", errNoBinary, err)
	}
	record := filepath.Join(filepath.Dir(filepath.Dir(real)), "VERSIONS")
	b, err := os.ReadFile(record)
	if err != nil {
		return fmt.Errorf("%w: %s has no build record: %v", errWrongVersion, real, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if got := strings.Fields(first); len(got) != 2 || got[0] != gieModule || got[1] != want {
		return fmt.Errorf("%w: %s was built from %q (%s), want %s %s", errWrongVersion, real, first, record, gieModule, want)
	}
	return nil
}
