// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// certReloader serves a certificate and key from files and reloads them
// when either file's modification time changes, so a rotated Secret (as
// cert-manager writes it) is picked up by new connections without a
// restart. A reload that fails keeps the last good pair and is logged once
// (an error naming both files); the same files are not parsed again until
// one of them changes.
type certReloader struct {
	certFile, keyFile string

	mu              sync.Mutex
	cert            *tls.Certificate
	certMod, keyMod time.Time
	// failedCertMod and failedKeyMod are the modification times of the last
	// pair that failed to load.
	failedCertMod, failedKeyMod time.Time
}

// newCertReloader loads the pair once; the error names the files when they
// cannot be read or do not form a key pair.
func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) reload() error {
	cm, err := modTime(r.certFile)
	if err != nil {
		return err
	}
	km, err := modTime(r.keyFile)
	if err != nil {
		return err
	}
	if r.cert != nil && cm.Equal(r.certMod) && km.Equal(r.keyMod) {
		return nil
	}
	if r.cert != nil && cm.Equal(r.failedCertMod) && km.Equal(r.failedKeyMod) {
		return nil // this pair failed already and was logged; keep serving the last good one
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		err = fmt.Errorf("TLS key pair --tls-cert-file %q --tls-key-file %q: %w", r.certFile, r.keyFile, err)
		if r.cert != nil {
			r.failedCertMod, r.failedKeyMod = cm, km
			slog.Error("ADS certificate reload failed; still serving the previous certificate", "error", err)
		}
		return err
	}
	if r.cert != nil {
		slog.Info("ADS certificate reloaded", "certFile", r.certFile)
	}
	r.cert, r.certMod, r.keyMod = &c, cm, km
	return nil
}

func modTime(path string) (time.Time, error) {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("TLS file: %w", err)
	}
	return st.ModTime(), nil
}

// getCertificate is tls.Config.GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.reload() // on failure the last good pair is served
	return r.cert, nil
}

// serverCredentials are the ADS server's TLS credentials (TLS 1.2 or
// later; gRPC negotiates h2 over ALPN).
func serverCredentials(certFile, keyFile string) (credentials.TransportCredentials, error) {
	r, err := newCertReloader(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate}), nil
}

// clientCredentials are the transport credentials of a connection to
// pilot-discovery's ADS port: plaintext when asked for; else TLS verified
// against caFile (PEM) or, when caFile is empty, the system roots, with
// serverName overriding the name checked in the certificate. The error
// names caFile when it cannot be read or holds no certificate.
func clientCredentials(plaintext bool, caFile, serverName string) (credentials.TransportCredentials, error) {
	if plaintext {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %q: no PEM certificate in it", caFile)
		}
		cfg.RootCAs = pool
	}
	return credentials.NewTLS(cfg), nil
}
