// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package epp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Binary returns the path of kind's binary in $EPP_TEST_BINARIES. It fails the
// test, never skips it, when the variable is unset or the binary is missing,
// naming hack/epp-binaries.sh.
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
	return p, nil
}
