// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package eppproxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/infermesh/infermesh/pkg/test/certs"
)

// SelfSigned is a throwaway certificate for 127.0.0.1 and localhost.
type SelfSigned struct {
	Cert tls.Certificate
	// PEM is the certificate, for a client's CA pool.
	PEM []byte
}

// NewSelfSigned makes an ECDSA P-256 certificate valid for a day
// (pkg/test/certs).
func NewSelfSigned() (*SelfSigned, error) {
	certPEM, keyPEM, err := certs.SelfSigned("eppproxy")
	if err != nil {
		return nil, fmt.Errorf("eppproxy: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("eppproxy: key pair: %w", err)
	}
	return &SelfSigned{Cert: cert, PEM: certPEM}, nil
}

// ServerTLS is a server config offering ALPN h2 (gRPC servers, the EPPs
// included, refuse TLS without it).
func (s *SelfSigned) ServerTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{s.Cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
}

// ClientTLS is a client config trusting this certificate, with ALPN h2.
func (s *SelfSigned) ClientTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.PEM)
	return &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
}
