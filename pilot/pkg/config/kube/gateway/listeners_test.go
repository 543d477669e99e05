// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// seedGateway is the Gateway the issue adds to the seed: class istio, an
// HTTP listener on port 80 admitting routes from all namespaces.
func seedGateway() *gwv1.Gateway {
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gateway-namespace", Name: "gateway", Generation: 4},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: "istio",
			Listeners: []gwv1.Listener{{
				Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}},
			}},
		},
	}
}

func nsLabelsOf(m map[string]map[string]string) NamespaceLabels {
	return func(ns string) map[string]string { return m[ns] }
}

var testNamespaces = nsLabelsOf(map[string]map[string]string{
	"llm-namespace":     {"team": "llm"},
	"other-namespace":   {"team": "web"},
	"gateway-namespace": {},
})

func TestListenerAcceptance(t *testing.T) {
	tls := func(mode gwv1.TLSModeType, certs int) *gwv1.ListenerTLSConfig {
		c := &gwv1.ListenerTLSConfig{Mode: ptr.To(mode)}
		for range certs {
			c.CertificateRefs = append(c.CertificateRefs, gwv1.SecretObjectReference{Name: "cert"})
		}
		return c
	}
	cases := []struct {
		name                   string
		listener               gwv1.Listener
		accepted, resolvedRefs bool
		reason, refsReason     gwv1.ListenerConditionReason
		kinds                  []string
	}{
		{name: "HTTP", listener: gwv1.Listener{Protocol: gwv1.HTTPProtocolType}, accepted: true, resolvedRefs: true, kinds: []string{"HTTPRoute", "GRPCRoute"}},
		// Accepted; the Secret does not exist (no lookups), so its
		// reference does not resolve (TestCertificateRefs has the rest).
		{name: "HTTPS with certificateRefs", listener: gwv1.Listener{Protocol: gwv1.HTTPSProtocolType, TLS: tls(gwv1.TLSModeTerminate, 1)},
			accepted: true, refsReason: gwv1.ListenerReasonInvalidCertificateRef, kinds: []string{"HTTPRoute", "GRPCRoute"}},
		{name: "HTTPS with two certificateRefs", listener: gwv1.Listener{Protocol: gwv1.HTTPSProtocolType, TLS: tls(gwv1.TLSModeTerminate, 2)},
			reason: gwv1.ListenerReasonUnsupportedValue, resolvedRefs: true, kinds: []string{"HTTPRoute", "GRPCRoute"}},
		{name: "TLS passthrough", listener: gwv1.Listener{Protocol: gwv1.TLSProtocolType, TLS: tls(gwv1.TLSModePassthrough, 0)},
			accepted: true, resolvedRefs: true, kinds: []string{"TLSRoute"}},
		// certificateRefs are ignored in Passthrough mode (ListenerTLSConfig).
		{name: "TLS passthrough with certificateRefs", listener: gwv1.Listener{Protocol: gwv1.TLSProtocolType, TLS: tls(gwv1.TLSModePassthrough, 2)},
			accepted: true, resolvedRefs: true, kinds: []string{"TLSRoute"}},
		{name: "TLS terminate", listener: gwv1.Listener{Protocol: gwv1.TLSProtocolType, TLS: tls(gwv1.TLSModeTerminate, 1)},
			accepted: true, refsReason: gwv1.ListenerReasonInvalidCertificateRef, kinds: []string{"TLSRoute"}},
		{name: "TLS terminate without certificateRefs", listener: gwv1.Listener{Protocol: gwv1.TLSProtocolType, TLS: tls(gwv1.TLSModeTerminate, 0)},
			reason: gwv1.ListenerReasonUnsupportedValue, refsReason: gwv1.ListenerReasonInvalidCertificateRef, kinds: []string{"TLSRoute"}},
		{name: "TLS without tls", listener: gwv1.Listener{Protocol: gwv1.TLSProtocolType},
			reason: gwv1.ListenerReasonUnsupportedValue, resolvedRefs: true, kinds: []string{"TLSRoute"}},
		// A TLS listener takes TLSRoutes only: a TCPRoute listed is an
		// invalid kind (the Gateway API's TLSRouteListenerPassthroughSupportedKinds).
		{name: "TLS kinds: TCPRoute and TLSRoute", listener: gwv1.Listener{Protocol: gwv1.TLSProtocolType, TLS: tls(gwv1.TLSModePassthrough, 0),
			AllowedRoutes: &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "TCPRoute"}, {Kind: "TLSRoute"}}}},
			accepted: true, refsReason: gwv1.ListenerReasonInvalidRouteKinds, kinds: []string{"TLSRoute"}},
		{name: "HTTP kinds: TLSRoute", listener: gwv1.Listener{Protocol: gwv1.HTTPProtocolType,
			AllowedRoutes: &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "TLSRoute"}}}},
			accepted: true, refsReason: gwv1.ListenerReasonInvalidRouteKinds},
		{name: "TCP kinds: HTTPRoute", listener: gwv1.Listener{Protocol: gwv1.TCPProtocolType,
			AllowedRoutes: &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}, {Kind: "TCPRoute"}}}},
			accepted: true, refsReason: gwv1.ListenerReasonInvalidRouteKinds, kinds: []string{"TCPRoute"}},
		{name: "TCP with tls", listener: gwv1.Listener{Protocol: gwv1.TCPProtocolType, TLS: tls(gwv1.TLSModeTerminate, 1)},
			reason: gwv1.ListenerReasonUnsupportedValue, resolvedRefs: true, kinds: []string{"TCPRoute"}},
		{name: "UDP", listener: gwv1.Listener{Protocol: gwv1.UDPProtocolType}, reason: gwv1.ListenerReasonUnsupportedProtocol, resolvedRefs: true},
		{name: "HTTPS without certificateRefs", listener: gwv1.Listener{Protocol: gwv1.HTTPSProtocolType, TLS: tls(gwv1.TLSModeTerminate, 0)},
			reason: gwv1.ListenerReasonUnsupportedValue, refsReason: gwv1.ListenerReasonInvalidCertificateRef, kinds: []string{"HTTPRoute", "GRPCRoute"}},
		{name: "HTTPS without tls", listener: gwv1.Listener{Protocol: gwv1.HTTPSProtocolType},
			reason: gwv1.ListenerReasonUnsupportedValue, resolvedRefs: true, kinds: []string{"HTTPRoute", "GRPCRoute"}},
		{name: "HTTPS passthrough", listener: gwv1.Listener{Protocol: gwv1.HTTPSProtocolType, TLS: tls(gwv1.TLSModePassthrough, 1)},
			reason: gwv1.ListenerReasonUnsupportedValue, resolvedRefs: true, kinds: []string{"HTTPRoute", "GRPCRoute"}},
		{name: "TCP", listener: gwv1.Listener{Protocol: gwv1.TCPProtocolType}, accepted: true, resolvedRefs: true, kinds: []string{"TCPRoute"}},
		// An ExtensionRef to a kind that is not infermesh.io
		// ExternalProcessor: ResolvedRefs=False/InvalidListenerFilterRef
		// (TestListenerFilterResolution has the rest).
		{name: "listener filters", listener: gwv1.Listener{Protocol: gwv1.HTTPProtocolType, Filters: &gwv1.ListenerFilters{
			Requests: []gwv1.ListenerFilter{{Type: gwv1.ListenerFilterExtensionRef,
				ExtensionRef: &gwv1.LocalObjectReference{Group: "example.com", Kind: "BodyRouter", Name: "bbr"}}}}},
			accepted: true, refsReason: ListenerReasonInvalidListenerFilterRef, kinds: []string{"HTTPRoute", "GRPCRoute"}},
		{name: "listener filters on TCP", listener: gwv1.Listener{Protocol: gwv1.TCPProtocolType, Filters: &gwv1.ListenerFilters{
			Requests: []gwv1.ListenerFilter{{Type: gwv1.ListenerFilterExtensionRef,
				ExtensionRef: &gwv1.LocalObjectReference{Group: "infermesh.io", Kind: "ExternalProcessor", Name: "bbr"}}}}},
			reason: gwv1.ListenerReasonUnsupportedValue, resolvedRefs: true, kinds: []string{"TCPRoute"}},
		{name: "listener filters, empty list", listener: gwv1.Listener{Protocol: gwv1.HTTPProtocolType, Filters: &gwv1.ListenerFilters{}},
			accepted: true, resolvedRefs: true, kinds: []string{"HTTPRoute", "GRPCRoute"}},
		{name: "kinds: GRPCRoute only", listener: gwv1.Listener{Protocol: gwv1.HTTPProtocolType,
			AllowedRoutes: &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "GRPCRoute"}}}},
			accepted: true, resolvedRefs: true, kinds: []string{"GRPCRoute"}},
		{name: "kinds: unsupported kind", listener: gwv1.Listener{Protocol: gwv1.HTTPProtocolType,
			AllowedRoutes: &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "TCPRoute"}, {Kind: "HTTPRoute"}}}},
			accepted: true, refsReason: gwv1.ListenerReasonInvalidRouteKinds, kinds: []string{"HTTPRoute"}},
		{name: "kinds: HTTPRoute of another group", listener: gwv1.Listener{Protocol: gwv1.HTTPProtocolType,
			AllowedRoutes: &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Group: ptr.To(gwv1.Group("example.com")), Kind: "HTTPRoute"}}}},
			accepted: true, refsReason: gwv1.ListenerReasonInvalidRouteKinds},
		{name: "Selector without selector", listener: gwv1.Listener{Protocol: gwv1.HTTPProtocolType,
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSelector)}}},
			reason: gwv1.ListenerReasonUnsupportedValue, resolvedRefs: true, kinds: []string{"HTTPRoute", "GRPCRoute"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.listener.Name, tc.listener.Port = "l", 443
			gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw"}, Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{tc.listener}}}
			l := NewGatewayView(gw, CertificateLookups{}).Listeners[0]
			if l.Accepted != tc.accepted || l.Reason != tc.reason {
				t.Errorf("Accepted = %v (%s: %s), want %v (%s)", l.Accepted, l.Reason, l.Message, tc.accepted, tc.reason)
			}
			if l.ResolvedRefs != tc.resolvedRefs || l.RefsReason != tc.refsReason {
				t.Errorf("ResolvedRefs = %v (%s: %s), want %v (%s)", l.ResolvedRefs, l.RefsReason, l.RefsMessage, tc.resolvedRefs, tc.refsReason)
			}
			var kinds []string
			for _, k := range l.Kinds {
				if ptr.Deref(k.Group, "") != GatewayGroup {
					t.Errorf("supported kind %s has group %v", k.Kind, k.Group)
				}
				kinds = append(kinds, string(k.Kind))
			}
			if d := cmp.Diff(tc.kinds, kinds); d != "" {
				t.Errorf("supportedKinds (-want +got):\n%s", d)
			}
		})
	}
}

func TestListenerAllowsNamespace(t *testing.T) {
	sel := func(s *metav1.LabelSelector) *gwv1.AllowedRoutes {
		return &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSelector), Selector: s}}
	}
	from := func(f gwv1.FromNamespaces) *gwv1.AllowedRoutes {
		return &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(f)}}
	}
	cases := []struct {
		name    string
		allowed *gwv1.AllowedRoutes
		want    map[string]bool // route namespace -> admitted
	}{
		{name: "default is Same", want: map[string]bool{"gateway-namespace": true, "llm-namespace": false}},
		{name: "namespaces without from is Same", allowed: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{}},
			want: map[string]bool{"gateway-namespace": true, "llm-namespace": false}},
		{name: "Same", allowed: from(gwv1.NamespacesFromSame), want: map[string]bool{"gateway-namespace": true, "llm-namespace": false}},
		{name: "All", allowed: from(gwv1.NamespacesFromAll), want: map[string]bool{"gateway-namespace": true, "llm-namespace": true, "unknown": true}},
		{name: "Selector matchLabels", allowed: sel(&metav1.LabelSelector{MatchLabels: map[string]string{"team": "llm"}}),
			want: map[string]bool{"llm-namespace": true, "other-namespace": false, "gateway-namespace": false, "unknown": false}},
		{name: "Selector matchExpressions", allowed: sel(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"llm", "web"}}}}),
			want: map[string]bool{"llm-namespace": true, "other-namespace": true, "gateway-namespace": false}},
		{name: "Selector invalid", allowed: sel(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: "Bogus"}}}), want: map[string]bool{"llm-namespace": false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gw := seedGateway()
			gw.Spec.Listeners[0].AllowedRoutes = tc.allowed
			l := NewGatewayView(gw, CertificateLookups{}).Listeners[0]
			for ns, want := range tc.want {
				if got := l.AllowsNamespace(ns, testNamespaces); got != want {
					t.Errorf("AllowsNamespace(%s) = %v, want %v", ns, got, want)
				}
			}
		})
	}
}
