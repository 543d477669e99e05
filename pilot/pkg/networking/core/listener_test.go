// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
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
	// A pool backend without the inference flag is refused, not silently
	// routed around its EPP.
	if _, err := BuildGateway(seedGateway(), seedInputs(), Options{}); err == nil {
		t.Error("pool backend with inference disabled: no error")
	}
}

func TestHTTPSListenerTerminatesTLSPerHostname(t *testing.T) {
	gw := &model.Gateway{Namespace: "ns", Name: "gw", Listeners: []model.Listener{
		{Name: "a", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: "a.example.com", TLS: &model.ListenerTLS{CertificateRefs: []string{"ns/a-cert"}}},
		{Name: "b", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: "b.example.com", TLS: &model.ListenerTLS{CertificateRefs: []string{"ns/b-cert"}}},
	}}
	res := build(t, gw, Inputs{}, inferenceOn)
	l := res.Listeners[0]
	if len(l.FilterChains) != 2 || len(l.ListenerFilters) != 1 {
		t.Fatalf("filter chains %d, listener filters %d", len(l.FilterChains), len(l.ListenerFilters))
	}
	for i, want := range []string{"a", "b"} {
		fc := l.FilterChains[i]
		if got := fc.GetFilterChainMatch().GetServerNames(); len(got) != 1 || got[0] != want+".example.com" {
			t.Errorf("chain %d server names %v", i, got)
		}
		ctx := &tlsv3.DownstreamTlsContext{}
		if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
			t.Fatal(err)
		}
		if got := ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs(); len(got) != 1 || got[0].Name != "ns/"+want+"-cert" {
			t.Errorf("chain %d secrets %v", i, got)
		}
	}
	if res.Routes[0].Name != "https.443" {
		t.Errorf("route configuration %q, want https.443", res.Routes[0].Name)
	}

	gw.Listeners[0].TLS = nil
	if _, err := BuildGateway(gw, Inputs{}, inferenceOn); err == nil {
		t.Error("HTTPS listener without certificates: no error")
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
