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
	"github.com/infermesh/infermesh/pkg/test/certs"
)

func filterNames(t *testing.T, res Resources, listener string) []string {
	t.Helper()
	var names []string
	for _, f := range hcmOf(t, res, listener).HttpFilters {
		names = append(names, f.Name)
	}
	return names
}

func TestListenersOnePerPortWithRDS(t *testing.T) {
	gw := &model.Gateway{Namespace: "ns", Name: "gw", Listeners: []model.Listener{
		{Name: "b", Port: 8080, Protocol: gwv1.HTTPProtocolType, Hostname: "b.example.com"},
		{Name: "a", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: "a.example.com"},
		{Name: "a2", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: "c.example.com"},
	}}
	res := build(t, gw, Inputs{}, inferenceOn)
	if len(res.Listeners) != 2 || res.Listeners[0].Name != "0.0.0.0_80" || res.Listeners[1].Name != "0.0.0.0_8080" {
		t.Fatalf("listeners = %v", res.Listeners)
	}
	for _, l := range res.Listeners {
		port := l.GetAddress().GetSocketAddress().GetPortValue()
		hcm := hcmOf(t, res, l.Name)
		if got, want := hcm.GetRds().GetRouteConfigName(), RouteConfigName(port, false); got != want {
			t.Errorf("%s: RDS name %q, want %q", l.Name, got, want)
		}
		if hcm.GetRds().GetConfigSource().GetAds() == nil {
			t.Errorf("%s: RDS config source is not ADS", l.Name)
		}
		if got := strings.Join(filterNames(t, res, l.Name), ","); got != FilterCORS+","+FilterExtProc+","+FilterRouter {
			t.Errorf("%s: HTTP filters %s", l.Name, got)
		}
	}
	if len(res.Routes) != 2 {
		t.Errorf("got %d route configurations, want one per port", len(res.Routes))
	}
}

func TestListenerWithoutInferenceHasNoExtProc(t *testing.T) {
	gw := gateway(httpRoute("web", "site", nil, model.Rule{Backends: []model.Backend{{Weight: 1, Service: svc("web", "site", 80)}}}))
	res := build(t, gw, Inputs{}, Options{})
	if got := strings.Join(filterNames(t, res, "0.0.0.0_80"), ","); got != FilterCORS+","+FilterRouter {
		t.Errorf("HTTP filters %s, want cors,router", got)
	}
	// A pool backend without the inference flag is answered 500, not
	// silently routed around its EPP, and the rest of the Gateway builds.
	res = build(t, seedGateway(), seedInputs(), Options{})
	rs := routesOf(t, res, "http.80", "llm.ssup2.com:80")
	if len(rs) != 1 || rs[0].GetDirectResponse().GetStatus() != 500 {
		t.Errorf("pool backend with inference disabled: routes %v, want one direct 500", rs)
	}
}

// One rule that cannot be translated (a regular expression RE2 rejects, a
// mirror to a kind that is not a Service) costs only that rule: it is left
// out, CheckRoute names it, and the other routes of the Gateway are built.
func TestBadRuleDoesNotFailTheGateway(t *testing.T) {
	regex := gwv1.PathMatchRegularExpression
	bad := httpRoute("web", "bad", nil,
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &regex, Value: ptr.To("/(a")}}}},
			Backends: []model.Backend{{Weight: 1, Service: svc("web", "site", 80)}}},
		model.Rule{HTTP: &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestMirror,
			RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{
				Group: ptr.To(gwv1.Group("inference.networking.k8s.io")), Kind: ptr.To(gwv1.Kind("InferencePool")), Name: "p"}}}}},
			Backends: []model.Backend{{Weight: 1, Service: svc("web", "site", 80)}}})
	good := httpRoute("web", "good", nil, model.Rule{Backends: []model.Backend{{Weight: 1, Service: svc("web", "site", 80)}}})
	res := build(t, gateway(bad, good), Inputs{}, Options{})
	var names []string
	for _, rc := range res.Routes {
		for _, vh := range rc.VirtualHosts {
			for _, r := range vh.Routes {
				names = append(names, r.GetName())
			}
		}
	}
	if strings.Join(names, ",") != "web.good.0" {
		t.Errorf("routes %v, want only web.good.0 (both rules of web/bad left out)", names)
	}
	if ps := CheckRoute(bad, Options{}); len(ps) != 2 || ps[0].Field != "matches[0]" || ps[1].Rule != 1 {
		t.Errorf("CheckRoute(bad) = %+v, want rule 0 matches[0] and rule 1", ps)
	}
}

func TestHTTPSListenerTerminatesTLSPerHostname(t *testing.T) {
	gw := &model.Gateway{Namespace: "ns", Name: "gw", Listeners: []model.Listener{
		{Name: "a", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: "a.example.com", TLS: &model.ListenerTLS{CertificateRefs: []string{"ns/a-cert"}}},
		{Name: "b", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: "b.example.com", TLS: &model.ListenerTLS{CertificateRefs: []string{"ns/b-cert"}}},
		{Name: "any", Port: 443, Protocol: gwv1.HTTPSProtocolType, TLS: &model.ListenerTLS{CertificateRefs: []string{"certs/any-cert"}}},
	}}
	res := build(t, gw, Inputs{}, inferenceOn)
	l := res.Listeners[0]
	if len(l.FilterChains) != 3 || len(l.ListenerFilters) != 1 || l.ListenerFilters[0].Name != "envoy.filters.listener.tls_inspector" {
		t.Fatalf("filter chains %d, listener filters %v", len(l.FilterChains), l.ListenerFilters)
	}
	for i, want := range []struct{ name, host, secret string }{
		{"a", "a.example.com", "kubernetes-gateway://ns/a-cert"},
		{"b", "b.example.com", "kubernetes-gateway://ns/b-cert"},
		{"any", "", "kubernetes-gateway://certs/any-cert"},
	} {
		fc := l.FilterChains[i]
		if fc.Name != want.name {
			t.Errorf("chain %d named %q, want %q", i, fc.Name, want.name)
		}
		got := fc.GetFilterChainMatch().GetServerNames()
		if (want.host == "" && len(got) != 0) || (want.host != "" && (len(got) != 1 || got[0] != want.host)) {
			t.Errorf("chain %d server names %v, want %q", i, got, want.host)
		}
		ctx := &tlsv3.DownstreamTlsContext{}
		if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
			t.Fatal(err)
		}
		sds := ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()
		if len(sds) != 1 || sds[0].Name != want.secret {
			t.Fatalf("chain %d secrets %v, want %s", i, sds, want.secret)
		}
		src := sds[0].GetSdsConfig()
		if src.GetAds() == nil || src.GetResourceApiVersion() != corev3.ApiVersion_V3 || src.GetInitialFetchTimeout().AsDuration() != 0 {
			t.Errorf("chain %d SDS config source %v, want ADS, V3, initial_fetch_timeout 0", i, src)
		}
		if alpn := ctx.GetCommonTlsContext().GetAlpnProtocols(); !slices.Equal(alpn, []string{"h2", "http/1.1"}) {
			t.Errorf("chain %d ALPN %v", i, alpn)
		}
	}
	names, err := SecretNames(res.Listeners, res.Clusters)
	if err != nil || !slices.Equal(names, []string{"kubernetes-gateway://certs/any-cert", "kubernetes-gateway://ns/a-cert", "kubernetes-gateway://ns/b-cert"}) {
		t.Errorf("SecretNames = %v, %v", names, err)
	}
	var rcNames []string
	for _, rc := range res.Routes {
		rcNames = append(rcNames, rc.Name)
	}
	if want := []string{"https.443.a", "https.443.any", "https.443.b"}; !slices.Equal(rcNames, want) {
		t.Errorf("route configurations %v, want one per chain %v", rcNames, want)
	}

	gw.Listeners[0].TLS = nil
	if _, err := BuildGateway(gw, Inputs{}, inferenceOn); err == nil {
		t.Error("HTTPS listener without certificates: no error")
	}
}

// TestHTTPSListenerClientValidation: the Gateway's spec.tls.frontend
// becomes the chain's client-certificate validation (Envoy's
// DownstreamTlsContext.require_client_certificate and
// CertificateValidationContext trusted_ca / trust_chain_verification):
// AllowValidOnly requires a certificate that verifies, AllowInsecureFallback
// asks for one and accepts any or none; a chain without validation asks
// for none. A CA bundle Envoy could not load fails the Gateway's build.
func TestHTTPSListenerClientValidation(t *testing.T) {
	ca, _, err := certs.SelfSigned("client-ca")
	if err != nil {
		t.Fatal(err)
	}
	gw := &model.Gateway{Namespace: "ns", Name: "gw", Listeners: []model.Listener{
		{Name: "strict", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: "a.example.com",
			TLS: &model.ListenerTLS{CertificateRefs: []string{"ns/a"}, ClientValidation: &model.ClientValidation{CACertificates: ca}}},
		{Name: "fallback", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: "b.example.com",
			TLS: &model.ListenerTLS{CertificateRefs: []string{"ns/b"}, ClientValidation: &model.ClientValidation{CACertificates: ca, AllowInsecureFallback: true}}},
		{Name: "none", Port: 443, Protocol: gwv1.HTTPSProtocolType, TLS: &model.ListenerTLS{CertificateRefs: []string{"ns/c"}}},
	}}
	res := build(t, gw, Inputs{}, inferenceOn)
	for i, want := range []struct {
		require   bool
		ca        bool
		untrusted bool
	}{{require: true, ca: true}, {ca: true, untrusted: true}, {}} {
		fc := res.Listeners[0].FilterChains[i]
		ctx := &tlsv3.DownstreamTlsContext{}
		if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
			t.Fatal(err)
		}
		vc := ctx.GetCommonTlsContext().GetValidationContext()
		if got := ctx.GetRequireClientCertificate().GetValue(); got != want.require {
			t.Errorf("chain %s: require_client_certificate %v, want %v", fc.Name, got, want.require)
		}
		if got := vc.GetTrustedCa().GetInlineBytes(); want.ca != (got != nil) || (want.ca && string(got) != string(ca)) {
			t.Errorf("chain %s: trusted_ca %q, want the CA: %v", fc.Name, got, want.ca)
		}
		if got := vc.GetTrustChainVerification() == tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED; got != want.untrusted {
			t.Errorf("chain %s: trust_chain_verification %v, want ACCEPT_UNTRUSTED: %v", fc.Name, vc.GetTrustChainVerification(), want.untrusted)
		}
	}
	gw.Listeners[0].TLS.ClientValidation.CACertificates = []byte("not a certificate")
	if _, err := BuildGateway(gw, Inputs{}, inferenceOn); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA bundle without a certificate: %v, want an error", err)
	}
}

func TestListenerPortMixingProtocolsIsAnError(t *testing.T) {
	gw := &model.Gateway{Namespace: "ns", Name: "gw", Listeners: []model.Listener{
		{Name: "a", Port: 8443, Protocol: gwv1.HTTPProtocolType},
		{Name: "b", Port: 8443, Protocol: gwv1.HTTPSProtocolType, TLS: &model.ListenerTLS{CertificateRefs: []string{"ns/c"}}},
	}}
	if _, err := BuildListeners(gw, Options{}); err == nil {
		t.Error("no error")
	}
}
