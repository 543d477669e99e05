// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extauthz

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Version is the istio.io/istio version hack/extauthz-binary.sh builds the
// sample from by default (bench/istio's).
const Version = "v0.0.0-20260827124520-eed52ebb66ad"

// BinariesEnv names the environment variable pointing at the folder that
// holds the extauthz binary: the folder hack/extauthz-binary.sh prints.
const BinariesEnv = "EXTAUTHZ_TEST_BINARIES"

// binaryName is the binary's file name in that folder.
const binaryName = "extauthz"

// The sample server's protocol (its main.go): the header it decides on, the
// headers it answers with, and its denial's body.
const (
	CheckHeader    = "x-ext-authz"
	AllowValue     = "allow"
	ResultHeader   = "x-ext-authz-check-result"
	ReceivedHeader = "x-ext-authz-check-received"
	ResultAllowed  = "allowed"
	ResultDenied   = "denied"
	DenyBody       = "denied by ext_authz for not found header `x-ext-authz: allow` in the request"
)

var errNoBinary = errors.New("extauthz: authorization server binary not found; build it with hack/extauthz-binary.sh (or `make integ`) and set " +
	BinariesEnv + " to the folder it prints")

// Binary returns the path of the server's binary in $EXTAUTHZ_TEST_BINARIES.
// It fails the test, never skips it, when the variable is unset or the
// binary is missing, naming hack/extauthz-binary.sh.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := findBinary(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// findBinary is Binary with the environment injected.
func findBinary(getenv func(string) string) (string, error) {
	dir := getenv(BinariesEnv)
	if dir == "" {
		return "", fmt.Errorf("%w: %s is not set", errNoBinary, BinariesEnv)
	}
	p := filepath.Join(dir, binaryName)
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoBinary, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s is not an executable file", errNoBinary, p)
	}
	return p, nil
}
