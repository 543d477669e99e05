// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package epp

import (
	"crypto/tls"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial returns a gRPC client connection to the ext_proc server, plaintext or
// TLS as the process serves it. For TLS it skips certificate verification, as
// the seed's DestinationRule (insecureSkipVerify) does for the EPP's
// self-signed certificate; gRPC's TLS credentials offer ALPN h2, which both
// EPPs require. The connection is closed at t's cleanup.
func (p *Process) Dial(t testing.TB) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if p.cfg.TLS {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the EPP's self-signed certificate
	}
	conn, err := grpc.NewClient(p.Addr(), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatalf("epp: dial %s: %v", p.Addr(), err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
