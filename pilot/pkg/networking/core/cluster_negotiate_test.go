// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// alpnOf is the ALPN list of cluster name's upstream TLS, nil without TLS.
func alpnOf(t *testing.T, res Resources, name string) []string {
	t.Helper()
	ts := clusterNamed(t, res, name).GetTransportSocket()
	if ts == nil {
		return nil
	}
	var u tlsv3.UpstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&u); err != nil {
		t.Fatal(err)
	}
	return u.GetCommonTlsContext().GetAlpnProtocols()
}

// A Service port that negotiates its HTTP version (NegotiateHTTP: no
// declared protocol, client TLS) gets one cluster, shared by an HTTPRoute,
// a GRPCRoute and a GRPCRoute's mirror, with HttpProtocolOptions
// auto_config (http_protocol_options and http2_protocol_options) and ALPN
// h2,http/1.1 in its UpstreamTlsContext; the GRPCRoute is sent to it (not
// 500) and the mirror does not turn it into explicit HTTP/2. A port that
// declares HTTP/1 with TLS keeps no protocol options and no ALPN; one that
// declares HTTP/2 keeps explicit HTTP/2 and ALPN h2. NegotiateHTTP without
// TLS (only a hand-built model can have it) is never auto_config, which
// Envoy would refuse without TLS: the cluster is HTTP/1.1 and a GRPCRoute
// to it answers 500.
func TestNegotiatingServiceCluster(t *testing.T) {
	tlsTo := func(s *model.ServiceBackend) *model.ServiceBackend {
		s.TLS = &model.EPPTLS{Host: s.Host, SNI: "abc.example.com", CACertificates: []byte("-----BEGIN CERTIFICATE-----\n")}
		return s
	}
	auto := tlsTo(svc("web", "auto", 443))
	auto.NegotiateHTTP = true
	h1 := tlsTo(svc("web", "h1", 443))
	h2 := tlsTo(svc("web", "h2", 443))
	h2.HTTP2 = true
	noTLS := svc("web", "notls", 80)
	noTLS.NegotiateHTTP = true
	mirrored := tlsTo(svc("web", "mirrored", 443))
	mirrored.NegotiateHTTP = true
	mirrorName := ClusterName(443, mirrored.Host)

	grpcRule := func(s *model.ServiceBackend) model.Rule {
		return model.Rule{GRPC: &gwv1.GRPCRouteRule{}, Backends: []model.Backend{{Weight: 1, Service: s}}}
	}
	mirror := grpcRule(auto)
	mirror.GRPC.Filters = []gwv1.GRPCRouteFilter{{Type: gwv1.GRPCRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{
		BackendRef: gwv1.BackendObjectReference{Name: "mirrored", Namespace: ptr.To(gwv1.Namespace("web")), Port: ptr.To(gwv1.PortNumber(443))},
	}}}
	mirror.Mirrors = map[string]*model.ServiceBackend{mirrorName: mirrored}
	g := httpRoute("web", "g", []string{"grpc.example.com"}, mirror, grpcRule(h2), grpcRule(noTLS))
	g.Kind = "GRPCRoute"
	gw := gateway(
		httpRoute("web", "h", []string{"web.example.com"},
			model.Rule{Backends: []model.Backend{{Weight: 1, Service: auto}}},
			model.Rule{Backends: []model.Backend{{Weight: 1, Service: h1}}},
			model.Rule{Backends: []model.Backend{{Weight: 1, Service: noTLS}}}),
		g,
	)
	res := build(t, gw, Inputs{}, Options{})

	for _, name := range []string{ClusterName(443, auto.Host), mirrorName} {
		o := protocolOptions(t, res, name)
		ac := o.GetAutoConfig()
		if ac == nil || ac.GetHttpProtocolOptions() == nil || ac.GetHttp2ProtocolOptions() == nil {
			t.Errorf("%s: protocol options %v, want auto_config with http_protocol_options and http2_protocol_options", name, o)
		}
		if got := alpnOf(t, res, name); !slices.Equal(got, []string{"h2", "http/1.1"}) {
			t.Errorf("%s: ALPN %q, want h2,http/1.1", name, got)
		}
	}
	if o := protocolOptions(t, res, ClusterName(443, h1.Host)); o != nil || alpnOf(t, res, ClusterName(443, h1.Host)) != nil {
		t.Errorf("HTTP/1 port with TLS: options %v, ALPN %q; want none", o, alpnOf(t, res, ClusterName(443, h1.Host)))
	}
	if !isHTTP2(t, res, ClusterName(443, h2.Host)) || !slices.Equal(alpnOf(t, res, ClusterName(443, h2.Host)), []string{"h2"}) {
		t.Errorf("HTTP/2 port with TLS: HTTP/2 %v, ALPN %q; want explicit HTTP/2, h2", isHTTP2(t, res, ClusterName(443, h2.Host)), alpnOf(t, res, ClusterName(443, h2.Host)))
	}
	if o := protocolOptions(t, res, ClusterName(80, noTLS.Host)); o != nil {
		t.Errorf("NegotiateHTTP without TLS: options %v, want none (HTTP/1.1)", o)
	}

	rs := routesOf(t, res, "http.80", "grpc.example.com:80")
	if len(rs) != 3 || rs[0].GetRoute().GetCluster() != ClusterName(443, auto.Host) ||
		rs[1].GetRoute().GetCluster() != ClusterName(443, h2.Host) || rs[2].GetDirectResponse().GetStatus() != 500 {
		t.Fatalf("GRPCRoute routes %v, want the negotiating cluster, the h2 cluster, then 500 for the plaintext port", rs)
	}
	if ms := rs[0].GetRoute().GetRequestMirrorPolicies(); len(ms) != 1 || ms[0].GetCluster() != mirrorName {
		t.Errorf("GRPCRoute mirror %v, want %s", ms, mirrorName)
	}
}

// Validate refuses auto_config on a cluster without a TLS transport
// socket, as Envoy refuses a cluster whose USE_ALPN feature meets a
// transport socket that cannot do ALPN (rule 7).
func TestValidateAutoConfigNeedsTLS(t *testing.T) {
	auto := svc("web", "auto", 443)
	auto.NegotiateHTTP = true
	auto.TLS = &model.EPPTLS{Host: auto.Host, CACertificates: []byte("-----BEGIN CERTIFICATE-----\n")}
	good := build(t, gateway(httpRoute("web", "h", []string{"web.example.com"},
		model.Rule{Backends: []model.Backend{{Weight: 1, Service: auto}}})), Inputs{}, Options{})
	bad := clone(good)
	c := bad.Clusters[0]
	c.TransportSocket = nil
	err := Validate(bad)
	if err == nil || !strings.Contains(err.Error(), "auto_config") {
		t.Fatalf("Validate of auto_config without TLS: %v, want an auto_config error", err)
	}
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer"}
	if err := Validate(bad); err == nil || !strings.Contains(err.Error(), "auto_config") {
		t.Fatalf("Validate of auto_config over raw_buffer: %v, want an auto_config error", err)
	}
}
