// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// isHTTP2 reports whether cluster name speaks HTTP/2 by configuration
// (explicit_http_config http2_protocol_options).
func isHTTP2(t *testing.T, res Resources, name string) bool {
	t.Helper()
	return protocolOptions(t, res, name).GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

// protocolOptions is cluster name's HttpProtocolOptions, nil when it has
// none.
func protocolOptions(t *testing.T, res Resources, name string) *httpv3.HttpProtocolOptions {
	t.Helper()
	a := clusterNamed(t, res, name).TypedExtensionProtocolOptions[HTTPProtocolOptionsKey]
	if a == nil {
		return nil
	}
	var o httpv3.HttpProtocolOptions
	if err := a.UnmarshalTo(&o); err != nil {
		t.Fatal(err)
	}
	return &o
}

func TestClusterProtocols(t *testing.T) {
	h2c := pool("llm", "h2c", inferencev1.EndpointPickerFailClose)
	h2c.AppProtocol = inferencev1.AppProtocolH2C
	plain := pool("llm", "plain", inferencev1.EndpointPickerFailClose)
	plain.EPP.AppProtocol = "" // unknown: the EPP is still gRPC
	gw := gateway(
		httpRoute("llm", "a", []string{"a.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 1, Pool: h2c}}}),
		httpRoute("llm", "b", []string{"b.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 1, Pool: plain}, {Weight: 1, Service: svc("web", "site", 80)}}}),
	)
	res := build(t, gw, Inputs{}, inferenceOn)
	for name, want := range map[string]bool{
		ClusterName(54321, h2c.Host):              true,
		ClusterName(54321, plain.Host):            false,
		ClusterName(9002, h2c.EPP.Host):           true,
		ClusterName(9002, plain.EPP.Host):         true,
		"outbound|80||site.web.svc.cluster.local": false,
	} {
		if got := isHTTP2(t, res, name); got != want {
			t.Errorf("%s: HTTP/2 %v, want %v", name, got, want)
		}
	}
	// Services get no OverrideHost and no raised limits.
	s := clusterNamed(t, res, "outbound|80||site.web.svc.cluster.local")
	if s.LoadBalancingPolicy != nil || s.CircuitBreakers != nil {
		t.Errorf("Service cluster %v", s)
	}
	if clusterNamed(t, res, ClusterName(9002, plain.EPP.Host)).LoadBalancingPolicy != nil {
		t.Error("EPP cluster has OverrideHost")
	}
}

func TestClusterCircuitBreakersConfigurable(t *testing.T) {
	opts := inferenceOn
	opts.CircuitBreakers = CircuitBreakers{MaxRequests: 5000}
	res := build(t, seedGateway(), Inputs{}, opts)
	for _, name := range []string{seedShadowCluster, seedEPPCluster} {
		th := clusterNamed(t, res, name).GetCircuitBreakers().GetThresholds()
		if len(th) != 1 || th[0].GetMaxRequests().GetValue() != 5000 ||
			th[0].GetMaxPendingRequests().GetValue() != DefaultCircuitBreakerLimit || th[0].GetMaxConnections().GetValue() != DefaultCircuitBreakerLimit {
			t.Errorf("%s thresholds %v", name, th)
		}
	}
}

func TestEPPTLS(t *testing.T) {
	res := build(t, seedGatewayEPPTLS(EPPTLS{SNI: "epp.internal", CACertificates: []byte("-----BEGIN CERTIFICATE-----\n"),
		SubjectAltNames: []string{"epp.internal"}}), seedInputs(), inferenceOn)
	ctx := &tlsv3.UpstreamTlsContext{}
	if err := clusterNamed(t, res, seedEPPCluster).GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatal(err)
	}
	vc := ctx.GetCommonTlsContext().GetValidationContext()
	if ctx.Sni != "epp.internal" || len(ctx.GetCommonTlsContext().GetAlpnProtocols()) != 1 || ctx.GetCommonTlsContext().GetAlpnProtocols()[0] != "h2" ||
		string(vc.GetTrustedCa().GetInlineBytes()) != "-----BEGIN CERTIFICATE-----\n" || len(vc.GetMatchTypedSubjectAltNames()) != 1 {
		t.Errorf("TLS context %v", ctx)
	}
	// Plaintext without TLS on the EPP.
	plain := seedGateway()
	plain.Listeners[0].Routes[0].Rules[0].Backends[0].Pool.EPP.TLS = nil
	if c := clusterNamed(t, build(t, plain, Inputs{}, inferenceOn), seedEPPCluster); c.TransportSocket != nil {
		t.Errorf("EPP without TLS has a transport socket")
	}
	// TLS naming no CA and not skipping verification verifies against the
	// proxy's system trust store.
	ctx = &tlsv3.UpstreamTlsContext{}
	if err := clusterNamed(t, build(t, seedGatewayEPPTLS(EPPTLS{}), seedInputs(), inferenceOn), seedEPPCluster).GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ctx.GetCommonTlsContext().GetValidationContext().GetTrustedCa().GetFilename(); got != DefaultSystemCAFile {
		t.Errorf("trusted_ca.filename = %q, want %q", got, DefaultSystemCAFile)
	}
}

// grpcRoute is a GRPCRoute ns/name on hosts with one rule (method
// inference.v1.Generator/Generate) to backend.
func grpcRoute(ns, name string, hosts []string, backend model.Backend) *model.Route {
	r := httpRoute(ns, name, hosts, model.Rule{
		GRPC: &gwv1.GRPCRouteRule{Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{
			Service: ptr.To("inference.v1.Generator"), Method: ptr.To("Generate"),
		}}}},
		Backends: []model.Backend{backend},
	})
	r.Kind = "GRPCRoute"
	return r
}

// One pool behind an HTTPRoute and a GRPCRoute: the pool's appProtocol
// alone decides its shadow cluster's protocol, whoever uses it. With http
// (HTTP/1.1) the cluster stays HTTP/1.1, so the HTTPRoute's model servers
// are never spoken to in h2c, and the GRPCRoute's rule answers 500: gRPC
// cannot travel over HTTP/1.1, and the controller reports that use as
// ResolvedRefs=False/UnsupportedProtocol. With kubernetes.io/h2c both
// routes share the one HTTP/2 cluster. No second cluster for the pool.
func TestPoolProtocolIsTheAppProtocolOfThePool(t *testing.T) {
	for _, tc := range []struct {
		appProtocol inferencev1.AppProtocol
		http2       bool
	}{
		{inferencev1.AppProtocolHTTP, false},
		{"", false}, // unset is HTTP/1.1 (GIE's default)
		{inferencev1.AppProtocolH2C, true},
	} {
		name := string(tc.appProtocol)
		if name == "" {
			name = "unset"
		}
		t.Run(name, func(t *testing.T) {
			p := pool("llm", "shared", inferencev1.EndpointPickerFailOpen)
			p.AppProtocol = tc.appProtocol
			gw := gateway(
				httpRoute("llm", "chat", []string{"chat.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 1, Pool: p}}}),
				grpcRoute("llm", "generate", []string{"grpc.example.com"}, model.Backend{Weight: 1, Pool: p}),
			)
			res := build(t, gw, Inputs{}, inferenceOn)
			shadow := ClusterName(54321, p.Host)
			if got := isHTTP2(t, res, shadow); got != tc.http2 {
				t.Errorf("shadow cluster %s: HTTP/2 %v, want %v (the pool's appProtocol is %q)", shadow, got, tc.http2, tc.appProtocol)
			}
			if len(res.Clusters) != 2 {
				t.Errorf("got %d clusters, want the shadow cluster and the EPP's", len(res.Clusters))
			}
			if got := routesOf(t, res, "http.80", "chat.example.com:80")[0].GetRoute().GetCluster(); got != shadow {
				t.Errorf("HTTPRoute cluster = %q, want %q", got, shadow)
			}
			g := routesOf(t, res, "http.80", "grpc.example.com:80")[0]
			switch {
			case tc.http2 && g.GetRoute().GetCluster() != shadow:
				t.Errorf("GRPCRoute to an h2c pool: action %v, want cluster %s", g.GetAction(), shadow)
			case !tc.http2 && g.GetDirectResponse().GetStatus() != 500:
				t.Errorf("GRPCRoute to an HTTP/1.1 pool: action %v, want direct_response 500", g.GetAction())
			}
		})
	}
}

// A verified EPP certificate must also name the EPP (Envoy checks only the
// chain without SAN matchers): the SubjectAltNames, else the SNI sent (the
// rule's sni, else the EPP host). InsecureSkipVerify verifies nothing.
func TestEPPTLSVerifiesName(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  EPPTLS
		want []string // DNS exact matchers; nil: no validation context
	}{
		{"no sni, no SANs: the EPP host", EPPTLS{}, []string{seedEPPHost}},
		{"sni, no SANs: the sni", EPPTLS{SNI: "epp.example.com"}, []string{"epp.example.com"}},
		{"SANs win over the sni", EPPTLS{SNI: "epp.example.com", SubjectAltNames: []string{"a.example.com", "b.example.com"}},
			[]string{"a.example.com", "b.example.com"}},
		{"CA inline, no SANs: the EPP host", EPPTLS{CACertificates: []byte("-----BEGIN CERTIFICATE-----\n")}, []string{seedEPPHost}},
		{"insecureSkipVerify: nothing verified", EPPTLS{InsecureSkipVerify: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := &tlsv3.UpstreamTlsContext{}
			if err := clusterNamed(t, build(t, seedGatewayEPPTLS(tc.tls), seedInputs(), inferenceOn), seedEPPCluster).GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
				t.Fatal(err)
			}
			vc := ctx.GetCommonTlsContext().GetValidationContext()
			if tc.want == nil {
				if vc != nil {
					t.Fatalf("validation context %v, want none", vc)
				}
				return
			}
			var got []string
			for _, m := range vc.GetMatchTypedSubjectAltNames() {
				if m.GetSanType() != tlsv3.SubjectAltNameMatcher_DNS || m.GetMatcher().GetExact() == "" {
					t.Fatalf("matcher %v, want DNS exact", m)
				}
				got = append(got, m.GetMatcher().GetExact())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("match_typed_subject_alt_names (-want +got):\n%s", diff)
			}
		})
	}
}

// A Service cluster's protocol is the Service port's, whichever routes use
// it: a GRPCRoute beside an HTTPRoute to an HTTP/1.1 port leaves the
// cluster HTTP/1.1 (the GRPCRoute's rule answers 500), and a port that
// declares HTTP/2 is HTTP/2 for the HTTPRoute too.
func TestServiceClusterProtocolIsThePorts(t *testing.T) {
	grpcRule := func(s *model.ServiceBackend) model.Rule {
		return model.Rule{GRPC: &gwv1.GRPCRouteRule{}, Backends: []model.Backend{{Weight: 1, Service: s}}}
	}
	plain, h2 := svc("web", "plain", 80), svc("web", "h2", 80)
	h2.HTTP2 = true
	g := httpRoute("web", "g", []string{"grpc.example.com"}, grpcRule(plain), grpcRule(h2))
	g.Kind = "GRPCRoute"
	gw := gateway(
		httpRoute("web", "h", []string{"web.example.com"}, model.Rule{Backends: []model.Backend{{Weight: 1, Service: plain}}},
			model.Rule{Backends: []model.Backend{{Weight: 1, Service: h2}}}),
		g,
	)
	res := build(t, gw, Inputs{}, Options{})
	if isHTTP2(t, res, ClusterName(80, plain.Host)) || !isHTTP2(t, res, ClusterName(80, h2.Host)) {
		t.Errorf("HTTP/2: plain %v, h2 %v; want false, true", isHTTP2(t, res, ClusterName(80, plain.Host)), isHTTP2(t, res, ClusterName(80, h2.Host)))
	}
	rs := routesOf(t, res, "http.80", "grpc.example.com:80")
	if len(rs) != 2 || rs[0].GetDirectResponse().GetStatus() != 500 || rs[1].GetRoute().GetCluster() != ClusterName(80, h2.Host) {
		t.Errorf("GRPCRoute routes %v, want 500 for the HTTP/1.1 port and the h2 cluster", rs)
	}
}
