// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package upstreamtls

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ParseCABundle checks a CA bundle before it is inlined as a cluster's
// trusted_ca: data must hold at least one PEM block, every block must be of
// type CERTIFICATE, and every certificate must parse with crypto/x509. The
// result is the certificates re-encoded, one PEM block each, so what a
// proxy loads is exactly what was checked (text around the blocks, such as
// the comments of a system bundle, is dropped).
//
// Envoy loads trusted_ca as a whole (source/common/tls/cert_validator/
// default_validator.cc, DefaultCertValidator::initializeSslContexts, with
// BoringSSL's PEM_X509_INFO_read_bio): one block it cannot read fails with
// "Failed to load trusted CA certificates", which refuses the cluster and
// with it the whole CDS update of a Gateway every tenant shares. A bad
// block is therefore refused here, naming its position, rather than
// handed on. Stricter than Envoy: a block of another type (Envoy would
// also load an X509 CRL) is refused too.
func ParseCABundle(data []byte) ([]byte, error) {
	var out bytes.Buffer
	rest := data
	for n := 1; ; n++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is %q, not CERTIFICATE", n, b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("PEM block %d is not a certificate: %v", n, err)
		}
		if err := pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}); err != nil {
			return nil, err
		}
	}
	if out.Len() == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out.Bytes(), nil
}
