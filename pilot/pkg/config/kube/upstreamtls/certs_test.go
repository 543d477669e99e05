// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package upstreamtls

import (
	"encoding/pem"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/certs"
)

// testCert is a real self-signed certificate (PEM) for name.
func testCert(t *testing.T, name string) string {
	t.Helper()
	crt, _, err := certs.SelfSigned(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(crt)
}

// garbageCert is a PEM block of type CERTIFICATE whose contents are not a
// certificate: what Envoy cannot load as trusted_ca (core.ParseCABundle
// refuses it).
func garbageCert(what string) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(what)}))
}
