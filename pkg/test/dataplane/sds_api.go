// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// compileSecret loads an SDS secret: a TlsCertificate with its chain and
// private key inline. A chain or key that does not load is refused (NACK),
// as Envoy refuses an SDS update whose TLS context cannot be built
// (ContextConfigImpl / ServerContextImpl throwing from the secret's update
// callback, source/common/secret/sds_api.cc onConfigUpdate). Validation
// contexts, session ticket keys and generic secrets are not implemented.
func compileSecret(s *tlsv3.Secret) (*tls.Certificate, error) {
	tc := s.GetTlsCertificate()
	if tc == nil {
		return nil, errors.New("only tls_certificate secrets are implemented")
	}
	chain, err := dataSourceBytes(tc.GetCertificateChain())
	if err != nil {
		return nil, fmt.Errorf("certificate_chain: %w", err)
	}
	key, err := dataSourceBytes(tc.GetPrivateKey())
	if err != nil {
		return nil, fmt.Errorf("private_key: %w", err)
	}
	cert, err := tls.X509KeyPair(chain, key)
	if err != nil {
		// crypto/tls's message never quotes the key.
		return nil, fmt.Errorf("failed to load certificate chain and private key: %v", err)
	}
	return &cert, nil
}

// trustedCAPool loads a CertificateValidationContext's trusted_ca as
// Envoy does (source/common/tls/cert_validator/default_validator.cc,
// DefaultCertValidator::initializeSslContexts): BoringSSL's
// PEM_X509_INFO_read_bio reads the whole bundle, and a block it cannot
// read, or a bundle with no certificate, fails with "Failed to load
// trusted CA certificates", which refuses the cluster or the listener.
// crypto/x509's AppendCertsFromPEM would instead skip a bad block and load
// the rest. Text outside the blocks is skipped, as BoringSSL does.
// Stricter than Envoy: a block of another type than CERTIFICATE (Envoy
// also takes an X509 CRL) is refused.
func trustedCAPool(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("failed to load trusted CA certificates: PEM block %d is %q (not implemented)", n, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("failed to load trusted CA certificates: PEM block %d: %v", n, err)
		}
		pool.AddCert(c)
	}
	// encoding/pem skips a block it cannot decode and goes on.
	if begins := bytes.Count(data, []byte("-----BEGIN ")); begins > n {
		return nil, fmt.Errorf("failed to load trusted CA certificates: %d of %d PEM blocks do not decode", begins-n, begins)
	}
	if n == 0 {
		return nil, errors.New("failed to load trusted CA certificates: no PEM certificate")
	}
	return pool, nil
}
