// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckStreamRoutes: check -f on the TLS/TCP corpus (also read by
// TestFileModeServesWhatStatusReports) names each broken TLSRoute and
// TCPRoute with its reason: a missing backend, a backend in another
// namespace no ReferenceGrant allows, a TCPRoute naming a TLS listener, and
// the TLS Terminate listener whose Secret is missing.
func TestCheckStreamRoutes(t *testing.T) {
	out, err := runCheck(t, "-f", "testdata/equivalence/streams")
	if !errors.Is(err, errCheckFailed) {
		t.Fatalf("err = %v, want errCheckFailed; output:\n%s", err, out)
	}
	for _, w := range []string{
		`condition  TLSRoute streams/broken (parent Gateway streams/streams): ResolvedRefs=False (BackendNotFound): Service streams/nowhere not found`,
		`condition  TCPRoute streams/weighted (parent Gateway streams/streams): ResolvedRefs=False (RefNotPermitted): Service databases/postgres: ` +
			`no ReferenceGrant in namespace databases allows references from TCPRoute in namespace streams`,
		`condition  TCPRoute streams/wrong-listener (parent Gateway streams/streams): Accepted=False (NotAllowedByListeners)`,
		`condition  Gateway streams/streams listener terminate-missing: ResolvedRefs=False (InvalidCertificateRef)`,
		"5 problem(s) found",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	for _, ok := range []string{"TLSRoute streams/wild ", "TLSRoute streams/exact ", "TLSRoute streams/terminated "} {
		if strings.Contains(out, ok) {
			t.Errorf("check reports %s, which is valid:\n%s", ok, out)
		}
	}
}
