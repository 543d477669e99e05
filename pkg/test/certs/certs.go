// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"
)

// CertPEM is SelfSigned's certificate for commonName, as a string; an
// error fails t.
func CertPEM(t testing.TB, commonName string) string {
	t.Helper()
	crt, _, err := SelfSigned(commonName)
	if err != nil {
		t.Fatal(err)
	}
	return string(crt)
}

// NotACertificatePEM is a PEM block of type CERTIFICATE whose contents are
// what, not a certificate: what Envoy cannot load as trusted_ca.
func NotACertificatePEM(what string) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(what)}))
}

// SelfSigned returns a PEM certificate and PEM ("EC PRIVATE KEY") key: an
// ECDSA P-256 server certificate named commonName, valid from an hour ago for
// one day, for 127.0.0.1 and localhost. It is its own CA (IsCA, cert sign),
// so a client trusts it by adding the certificate to its pool.
func SelfSigned(commonName string) (certPEM, keyPEM []byte, err error) {
	return SelfSignedFor(commonName, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
}

// SelfSignedFor is SelfSigned for the given addresses and DNS names.
func SelfSignedFor(commonName string, ips []net.IP, dnsNames []string) (certPEM, keyPEM []byte, err error) {
	return selfSigned(pkix.Name{CommonName: commonName}, x509.ExtKeyUsageServerAuth, ips, dnsNames)
}

// SelfSignedClient is a self-signed client certificate (ExtKeyUsage client
// auth) for commonName in organizations, as Kubernetes reads a user and
// its groups from a certificate; it is its own CA, so a server verifies it
// with the certificate itself in its client CA pool.
func SelfSignedClient(commonName string, organizations []string) (certPEM, keyPEM []byte, err error) {
	return selfSigned(pkix.Name{CommonName: commonName, Organization: organizations}, x509.ExtKeyUsageClientAuth, nil, nil)
}

func selfSigned(subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, dnsNames []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("certs: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           ips,
		DNSNames:              dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
