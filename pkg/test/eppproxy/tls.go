// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package eppproxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// SelfSigned is a throwaway certificate for 127.0.0.1 and localhost.
type SelfSigned struct {
	Cert tls.Certificate
	// PEM is the certificate, for a client's CA pool.
	PEM []byte
}

// NewSelfSigned makes an ECDSA P-256 certificate valid for a day.
func NewSelfSigned() (*SelfSigned, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("eppproxy: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("eppproxy: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "eppproxy"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("eppproxy: certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("eppproxy: key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
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
