// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package model

import (
	"reflect"
	"testing"

	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestGatewayEquals(t *testing.T) {
	route := func(name, path string) *Route {
		return &Route{Kind: "HTTPRoute", Namespace: "ns", Name: name, Hostnames: []string{name + ".example.com"},
			Rules: []Rule{{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Value: ptr.To(path)}}}}}}}
	}
	a, b := route("a", "/"), route("b", "/")
	base := func() Gateway {
		return Gateway{Namespace: "gw-ns", Name: "gw", Listeners: []Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Routes: []*Route{a, b}},
			{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, TLS: &ListenerTLS{CertificateRefs: []string{"ns/cert"}}, Routes: []*Route{b}},
		}}
	}
	for _, tc := range []struct {
		name   string
		change func(g *Gateway)
		equal  bool
	}{
		{"same routes", func(*Gateway) {}, true},
		{"a route rebuilt with equal content", func(g *Gateway) { g.Listeners[0].Routes[0] = route("a", "/") }, true},
		{"a route's rule differs", func(g *Gateway) { g.Listeners[0].Routes[1] = route("b", "/v1") }, false},
		{"a route fewer", func(g *Gateway) { g.Listeners[1].Routes = nil }, false},
		{"routes reordered", func(g *Gateway) { g.Listeners[0].Routes = []*Route{b, a} }, false},
		{"listener hostname", func(g *Gateway) { g.Listeners[1].Hostname = "x.example.com" }, false},
		{"listener TLS", func(g *Gateway) { g.Listeners[1].TLS = &ListenerTLS{CertificateRefs: []string{"ns/other"}} }, false},
		{"listener fewer", func(g *Gateway) { g.Listeners = g.Listeners[:1] }, false},
		{"body mode", func(g *Gateway) { g.EPPBodyMode = EPPBodyModeStreamed }, false},
		{"class problem", func(g *Gateway) { g.ClassParametersError = "bad" }, false},
		{"client certificate", func(g *Gateway) { g.BackendClientCertificate = "ns/client" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, o := base(), base()
			tc.change(&o)
			if got := g.Equals(o); got != tc.equal {
				t.Errorf("Equals = %t, want %t", got, tc.equal)
			}
			if got := o.Equals(g); got != tc.equal {
				t.Errorf("Equals the other way = %t, want %t", got, tc.equal)
			}
			// Equals is reflect.DeepEqual without looking into shared routes.
			if deep := reflect.DeepEqual(g, o); deep != tc.equal {
				t.Errorf("reflect.DeepEqual = %t, the case expects %t", deep, tc.equal)
			}
		})
	}
}
