// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/certs"

	"github.com/infermesh/infermesh/pkg/test/dataplane"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infermesh/infermesh/pkg/bootstrap"
)

// bearerGate is an ADS server's stream interceptor that lets through only
// streams sending "authorization: Bearer <token>", as pilot-discovery does
// when proxies must authenticate; it records what it saw.
type bearerGate struct {
	token string

	mu       sync.Mutex
	accepted int
	refused  []string // the authorization values refused ("" when absent)
}

func (g *bearerGate) intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	got := strings.Join(md.Get("authorization"), ",")
	g.mu.Lock()
	ok := got == "Bearer "+g.token
	if ok {
		g.accepted++
	} else {
		g.refused = append(g.refused, got)
	}
	g.mu.Unlock()
	if !ok {
		return status.Error(codes.Unauthenticated, "no valid bearer token")
	}
	return handler(srv, ss)
}

func (g *bearerGate) seen() (accepted int, refused []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.accepted, append([]string(nil), g.refused...)
}

// A Gateway whose pilot-discovery requires a token: pkg/bootstrap's
// bootstrap with TokenPath (Google gRPC client, TLS, file_based_metadata)
// sends the token file's content on the ADS stream and gets the Gateway's
// configuration. This holds only because the bootstrap names the
// file_based_metadata credentials factory: under Envoy's default factory
// the plugin is ignored and no token is sent.
func TestADSWithServiceAccountToken(t *testing.T) {
	ca := certs.NewCA(t)
	gate := &bearerGate{token: "gateway-sa-token"}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(gate.token), 0o600); err != nil {
		t.Fatal(err)
	}
	// The ADS server is reached by name (the certificate's, checked by the
	// client): localhost, which the gRPC client resolves without DNS.
	lis, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	serverTLS := &tls.Config{Certificates: []tls.Certificate{ca.ServerCert(t, "localhost")}, MinVersion: tls.VersionTLS12}
	runXDS(t, lis, grpc.Creds(credentials.NewTLS(serverTLS)), grpc.StreamInterceptor(gate.intercept))

	boot, err := bootstrap.JSON(bootstrap.Config{
		NodeID: "gw-0", Cluster: "gateway", GatewayNamespace: "gateway-namespace", GatewayName: "gateway",
		XDSAddress: net.JoinHostPort("localhost", port), CABundle: ca.PEM, TokenPath: tokenFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	dp := runDP(t, boot, nil, dataplane.Options{MaxBackoff: 100 * time.Millisecond})

	ctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer wcancel()
	if err := dp.WaitFor(ctx, func(s dataplane.Snapshot) bool { return s.Listeners["0.0.0.0_80"] != nil }); err != nil {
		accepted, refused := gate.seen()
		first := "(none)"
		if len(refused) > 0 {
			first = fmt.Sprintf("%q", refused[0])
		}
		t.Fatalf("the Gateway got no configuration: %v; the ADS server accepted %d streams and refused %d (the first with authorization %s)",
			err, accepted, len(refused), first)
	}
	if accepted, refused := gate.seen(); accepted == 0 || len(refused) != 0 {
		t.Fatalf("ADS server accepted %d streams and refused %q", accepted, refused)
	}
}
