// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package adsclient

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// DialOption configures Dial.
type DialOption func(*dialConfig)

type dialConfig struct {
	creds   credentials.TransportCredentials
	maxRecv int
}

// TLS dials over TLS trusting only roots; serverName, when not empty, is
// the name the server's certificate must carry (otherwise the dialled
// host).
func TLS(roots *x509.CertPool, serverName string) DialOption {
	return func(c *dialConfig) {
		c.creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, ServerName: serverName})
	}
}

// MaxRecvMsgSize raises the largest response the connection accepts
// (gRPC's default is 4 MiB), for benchmarks whose responses are larger.
func MaxRecvMsgSize(n int) DialOption { return func(c *dialConfig) { c.maxRecv = n } }

// Dial returns a client connection to addr, plaintext unless TLS is
// given; it is closed at the end of the test. The connection is made
// lazily, by the first stream.
func Dial(t testing.TB, addr string, opts ...DialOption) *grpc.ClientConn {
	t.Helper()
	c := dialConfig{creds: insecure.NewCredentials()}
	for _, o := range opts {
		o(&c)
	}
	dopts := []grpc.DialOption{grpc.WithTransportCredentials(c.creds)}
	if c.maxRecv > 0 {
		dopts = append(dopts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.maxRecv)))
	}
	conn, err := grpc.NewClient(addr, dopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
