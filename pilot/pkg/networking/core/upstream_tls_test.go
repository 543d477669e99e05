// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// credentialTLS is client TLS whose CA comes from a DestinationRule's
// credentialName, read in the namespaces of has (the CA "ca-<ns>") and
// failed in the others of all.
func credentialTLS(host string, has ...string) *EPPTLS {
	t := &EPPTLS{Host: host, CredentialName: "cred", CredentialCAs: map[string]model.CredentialCA{
		"elsewhere": {Problem: "Secret elsewhere/cred missing"},
	}}
	for _, ns := range has {
		t.CredentialCAs[ns] = model.CredentialCA{PEM: []byte("ca-" + ns)}
	}
	return t
}

// upstreamContext is cluster c's UpstreamTlsContext; it fails the test
// when the cluster has no TLS transport socket.
func upstreamContext(t *testing.T, c *clusterv3.Cluster) *tlsv3.UpstreamTlsContext {
	t.Helper()
	ctx := &tlsv3.UpstreamTlsContext{}
	if c.GetTransportSocket().GetName() != TransportSocketTLS {
		t.Fatalf("cluster %s has no TLS transport socket: %v", c.GetName(), c.GetTransportSocket())
	}
	if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// TestUpstreamTLSFailsClosedPerGateway: client TLS whose CA a Gateway
// cannot have (a credentialName read in another namespace only) never
// yields a cluster without its transport socket or one verifying against
// the system trust store: the backend's share is a direct 500, for a
// Service as for an EPP (whatever the pool's FailOpen), and a mirror to
// such a Service is not configured. With the CA in the Gateway's
// namespace, it is inlined as trusted_ca. Every cluster built carries TLS
// whenever its upstream has TLS.
func TestUpstreamTLSFailsClosedPerGateway(t *testing.T) {
	gwNS := seed.GatewayNamespace
	for _, tc := range []struct {
		name    string
		has     []string // namespaces where the CA was read
		reached bool
	}{
		{"the CA was read in the Gateway's namespace", []string{gwNS}, true},
		{"the CA was read only elsewhere", []string{"other"}, false},
		{"the CA was not read at all", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			web := svc("apps", "web", 443)
			web.TLS = credentialTLS(web.Host, tc.has...)
			mirrored := svc("apps", "copy", 443)
			mirrored.TLS = credentialTLS(mirrored.Host, tc.has...)
			p := pool("llm", "p", inferencev1.EndpointPickerFailOpen)
			p.EPP.TLS = credentialTLS(p.EPP.Host, tc.has...)
			mirrorCluster := ClusterName(443, mirrored.Host)
			gw := gateway(
				httpRoute("apps", "web", []string{"web.example.com"}, model.Rule{
					HTTP: &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestMirror,
						RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "copy", Port: ptr.To(gwv1.PortNumber(443))}}}}},
					Backends: []model.Backend{{Weight: 1, Service: web}},
					Mirrors:  map[string]*model.ServiceBackend{mirrorCluster: mirrored},
				}),
				httpRoute("llm", "pool", []string{"llm.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 1, Pool: p}}}),
			)
			res := build(t, gw, Inputs{}, inferenceOn)
			webRoute := routesOf(t, res, "http.80", "web.example.com:80")[0]
			poolRoute := routesOf(t, res, "http.80", "llm.example.com:80")[0]
			if !tc.reached {
				if webRoute.GetDirectResponse().GetStatus() != 500 || poolRoute.GetDirectResponse().GetStatus() != 500 {
					t.Fatalf("want direct 500 for both, got %v and %v", webRoute.GetAction(), poolRoute.GetAction())
				}
				if len(res.Clusters) != 0 {
					for _, c := range res.Clusters {
						t.Errorf("cluster %s built for an upstream this Gateway cannot verify", c.GetName())
					}
				}
				return
			}
			if webRoute.GetRoute().GetCluster() != ClusterName(443, web.Host) || len(webRoute.GetRoute().GetRequestMirrorPolicies()) != 1 {
				t.Fatalf("web route %v, want its cluster and the mirror", webRoute.GetAction())
			}
			for _, name := range []string{ClusterName(443, web.Host), mirrorCluster, ClusterName(9002, p.EPP.Host)} {
				ctx := upstreamContext(t, clusterNamed(t, res, name))
				ca := ctx.GetCommonTlsContext().GetValidationContext().GetTrustedCa()
				if string(ca.GetInlineBytes()) != "ca-"+gwNS || ca.GetFilename() != "" {
					t.Errorf("%s: trusted_ca %v, want the CA read in %s inline", name, ca, gwNS)
				}
			}
		})
	}
}

// TestEveryUpstreamWithTLSHasItsTransportSocket: whatever refers to a
// Service port (a backend, a mirror, an EPP), its cluster carries the TLS
// its model value asks for. A mirror-only Service used to get a plaintext
// cluster: mirrors carried no TLS.
func TestEveryUpstreamWithTLSHasItsTransportSocket(t *testing.T) {
	withTLS := func(s *model.ServiceBackend) *model.ServiceBackend {
		s.TLS = &EPPTLS{Host: s.Host, SNI: "x.example.com", CACertificates: []byte("ca")}
		return s
	}
	onlyMirrored := withTLS(svc("apps", "mirror", 8443))
	mirrorCluster := ClusterName(8443, onlyMirrored.Host)
	p := pool("llm", "p", inferencev1.EndpointPickerFailClose)
	p.EPP.TLS = &EPPTLS{Host: p.EPP.Host, InsecureSkipVerify: true}
	gw := gateway(httpRoute("apps", "r", []string{"a.example.com"}, model.Rule{
		HTTP: &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestMirror,
			RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "mirror", Port: ptr.To(gwv1.PortNumber(8443))}}}}},
		Backends: []model.Backend{{Weight: 1, Service: withTLS(svc("apps", "web", 443))}, {Weight: 1, Pool: p}},
		Mirrors:  map[string]*model.ServiceBackend{mirrorCluster: onlyMirrored},
	}))
	res := build(t, gw, Inputs{}, inferenceOn)
	for _, c := range res.Clusters {
		switch c.GetName() {
		case ClusterName(54321, p.Host):
			if c.GetTransportSocket() != nil {
				t.Errorf("the pool's model servers have no TLS setting: %v", c.GetTransportSocket())
			}
		default:
			ctx := upstreamContext(t, c)
			if c.GetName() == ClusterName(9002, p.EPP.Host) {
				if ctx.GetCommonTlsContext().GetValidationContext() != nil || !slices.Equal(ctx.GetCommonTlsContext().GetAlpnProtocols(), []string{"h2"}) {
					t.Errorf("EPP: %v", ctx)
				}
				continue
			}
			if string(ctx.GetCommonTlsContext().GetValidationContext().GetTrustedCa().GetInlineBytes()) != "ca" || ctx.GetSni() != "x.example.com" {
				t.Errorf("%s: %v", c.GetName(), ctx)
			}
		}
	}
	if len(res.Clusters) != 4 {
		t.Errorf("%d clusters, want web, mirror, pool and EPP", len(res.Clusters))
	}
}

// TestClusterWithoutItsCAIsAnError: should a cluster whose CA the Gateway
// cannot have ever be built (a model built by hand that bypasses
// backendCluster), it is an error naming the cluster, never a cluster
// without TLS or one trusting the system store.
func TestClusterWithoutItsCAIsAnError(t *testing.T) {
	packed, err := newPackedClusterConfig()
	if err != nil {
		t.Fatal(err)
	}
	s := &clusterSpec{name: "outbound|443||web.apps.svc.cluster.local", tls: credentialTLS("web.apps.svc.cluster.local", "other")}
	opts := Options{}.WithDefaults()
	opts.gatewayNamespace = seed.GatewayNamespace
	c, err := buildCluster(s, Inputs{}, opts, packed)
	if err == nil || !strings.Contains(err.Error(), "cluster outbound|443||web.apps.svc.cluster.local: no CA for its TLS") {
		t.Fatalf("cluster %v, error %v", c, err)
	}
}
