// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

// The certificate serves TLS on 127.0.0.1, by address and as localhost, to a
// client that trusts only it; a client that does not trust it fails.
func TestSelfSignedServes(t *testing.T) {
	certPEM, keyPEM, err := SelfSigned("test")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	for _, c := range []struct {
		name  string
		roots *x509.CertPool
		ok    bool
	}{{"127.0.0.1", pool, true}, {"localhost", pool, true}, {"localhost", x509.NewCertPool(), false}} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if conn, err := lis.Accept(); err == nil {
				_ = conn.(*tls.Conn).Handshake()
				_ = conn.Close()
			}
		}()
		conn, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{RootCAs: c.roots, ServerName: c.name, MinVersion: tls.VersionTLS12})
		if err == nil {
			_ = conn.Close()
		}
		if (err == nil) != c.ok {
			t.Errorf("dial as %s (trusting it: %v): err %v", c.name, c.ok, err)
		}
		<-done
	}
}
