// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"crypto/tls"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/anypb"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// alpnServer is an HTTPS server on loopback with cert that answers ALPN
// with serverProtos (nil: no ALPN answer at all) and speaks HTTP/2 when h2
// was negotiated, HTTP/1.1 otherwise. Its handler echoes the request's
// protocol in x-seen-proto; offered returns the ALPN list the last client
// offered.
func alpnServer(t *testing.T, cert tls.Certificate, serverProtos []string) (addr string, offered func() []string) {
	t.Helper()
	var mu sync.Mutex
	var last []string
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: serverProtos,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			mu.Lock()
			last = slices.Clone(hello.SupportedProtos)
			mu.Unlock()
			return nil, nil
		}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(slices.Contains(serverProtos, "h2"))
	srv := &http.Server{Protocols: &protos, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-seen-proto", r.Proto)
		w.Header().Set("x-seen-alpn", r.TLS.NegotiatedProtocol)
	})}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// negotiatingService is a Service port that declares no protocol, with
// client TLS to abc.example.com verified against ca: the model the
// controller resolves for a BackendTLSPolicy on such a port.
func negotiatingService(ca *testCA) *model.ServiceBackend {
	const host = "btls.ns.svc.cluster.local"
	return &model.ServiceBackend{Host: host, Port: 443, NegotiateHTTP: true, TLS: &model.EPPTLS{Host: host, SNI: "abc.example.com",
		CACertificates: ca.pem, SubjectAltNames: []string{"abc.example.com"}}}
}

// A cluster with HttpProtocolOptions auto_config (what core builds for a
// negotiating Service port) offers ALPN h2,http/1.1 and speaks HTTP/2 to a
// TLS server that picks h2 and HTTP/1.1 to one that picks http/1.1 or
// answers no ALPN, as Envoy's mixed connection pool does
// (HttpConnPoolImplMixed::onConnected, source/common/http/
// mixed_conn_pool.cc; the offer is the pool's ALPN fallback,
// wrapTransportSocketOptions in source/common/http/conn_pool_base.cc).
// The same holds when the TLS context names no ALPN at all: Envoy then
// offers the fallback, h2,http/1.1.
func TestAutoConfigNegotiatesHTTPByALPN(t *testing.T) {
	ca := newTestCA(t)
	cert := ca.serverCert(t, "abc.example.com")
	for _, tc := range []struct {
		name         string
		serverProtos []string
		contextALPN  bool // false: the cluster's TLS context names no ALPN
		want         string
	}{
		{"server offers h2", []string{"h2", "http/1.1"}, true, "HTTP/2.0"},
		{"server offers http/1.1 only", []string{"http/1.1"}, true, "HTTP/1.1"},
		{"server answers no ALPN", nil, true, "HTTP/1.1"},
		{"context without ALPN, server offers h2", []string{"h2", "http/1.1"}, false, "HTTP/2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, offered := alpnServer(t, cert, tc.serverProtos)
			res := serviceBackendResources(t, negotiatingService(ca), "")
			if !tc.contextALPN {
				withALPN(t, res.Clusters[0], nil)
			}
			dp := newTestDP(t, Options{Dial: redirect(map[string]string{"10.0.0.1:8443": addr})})
			load(t, dp, resourcesOf(res)...)
			resp := get(t, dp, 80, "GET", "any.example.com", "/", nil)
			if resp.StatusCode != 200 || resp.Header.Get("x-seen-proto") != tc.want {
				t.Fatalf("status %d, server saw %q (ALPN %q); want 200 over %s", resp.StatusCode,
					resp.Header.Get("x-seen-proto"), resp.Header.Get("x-seen-alpn"), tc.want)
			}
			if got := offered(); !slices.Equal(got, []string{"h2", "http/1.1"}) {
				t.Errorf("ALPN offered %q, want h2,http/1.1", got)
			}
		})
	}
}

// withALPN sets the alpn_protocols of cluster c's UpstreamTlsContext.
func withALPN(t *testing.T, c *clusterv3.Cluster, alpn []string) {
	t.Helper()
	ts := c.GetTransportSocket()
	ts.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: editAny(t, ts.GetTypedConfig(), &tlsv3.UpstreamTlsContext{},
		func(u *tlsv3.UpstreamTlsContext) { u.CommonTlsContext.AlpnProtocols = alpn })}
}

// auto_config is refused (NACK) without a transport socket that can do
// ALPN, as Envoy refuses it ("ALPN configured for cluster ... which has a
// non-ALPN transport socket", ClusterImplBase in source/common/upstream/
// upstream_impl.cc; auto_config sets the cluster's USE_ALPN feature,
// source/extensions/upstreams/http/config.cc). An ALPN list in the TLS
// context other than none or h2,http/1.1 is refused as not implemented
// (stricter than Envoy, which would offer that list: Go's transport always
// offers both).
func TestAutoConfigNACKs(t *testing.T) {
	ca := newTestCA(t)
	dp := newTestDP(t, Options{})
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, res *core.Resources)
		want string
	}{
		{"no transport socket", func(_ *testing.T, res *core.Resources) { res.Clusters[0].TransportSocket = nil }, "non-ALPN transport socket"},
		{"ALPN http/1.1 only", func(t *testing.T, res *core.Resources) {
			withALPN(t, res.Clusters[0], []string{"http/1.1"})
		}, "not implemented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := serviceBackendResources(t, negotiatingService(ca), "")
			tc.edit(t, &res)
			a, err := anypb.New(res.Clusters[0])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dp.decode(resourcev3.ClusterType, a); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("cluster accepted or refused for another reason: %v; want an error with %q", err, tc.want)
			}
		})
	}
}

// grpcTLSServer is a real gRPC server (health) on loopback with TLS and
// cert; grpc-go offers only h2 by ALPN.
func grpcTLSServer(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// A GRPCRoute to a negotiating Service port (no declared protocol, client
// TLS): gRPC reaches a TLS gRPC server, which picks h2; against a TLS
// server that offers only http/1.1 the call goes out in HTTP/1.1 and fails,
// as it would through Envoy (the server decides, the proxy does not
// upgrade).
func TestGRPCRouteToNegotiatingPort(t *testing.T) {
	ca := newTestCA(t)
	cert := ca.serverCert(t, "abc.example.com")
	h1Addr, _ := alpnServer(t, cert, []string{"http/1.1"})
	for _, tc := range []struct {
		name string
		addr string
		ok   bool
	}{
		{"gRPC server over TLS (h2)", grpcTLSServer(t, cert), true},
		{"HTTP/1.1-only TLS server", h1Addr, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := negotiatingService(ca)
			gw := seedGateway()
			gw.Listeners[0].Routes = []*model.Route{{
				Kind: "GRPCRoute", Namespace: "grpc", Name: "health", Hostnames: []string{"grpc.example.com"},
				Rules: []model.Rule{{
					GRPC: &gwv1.GRPCRouteRule{Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{
						Service: ptr.To("grpc.health.v1.Health"), Method: ptr.To("Check"),
					}}}},
					Backends: []model.Backend{{Weight: 1, Service: svc}},
				}},
			}}
			res, err := core.BuildGateway(&gw, core.Inputs{Endpoints: map[string][]core.Endpoint{
				core.ClusterName(443, svc.Host): {{Address: "10.0.0.1", Port: 8443}},
			}}, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			dp := newTestDP(t, Options{Dial: redirect(map[string]string{"10.0.0.1:8443": tc.addr})})
			load(t, dp, resourcesOf(res)...)
			resp, err := grpcClient(t, dp).Check(testCtx(t), &healthpb.HealthCheckRequest{})
			switch {
			case tc.ok && (err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING):
				t.Fatalf("Check through the negotiating port: %v %v, want SERVING", resp, err)
			case !tc.ok && err == nil:
				t.Fatalf("Check against an HTTP/1.1-only server succeeded: %v", resp)
			}
		})
	}
}
