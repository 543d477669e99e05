// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"strings"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

func TestRouteHostnames(t *testing.T) {
	for _, tc := range []struct {
		listener string
		route    []string
		want     string
	}{
		{"", nil, "[*]"},
		{"a.example.com", nil, "[a.example.com]"},
		{"", []string{"b.com", "a.com", "a.com"}, "[a.com b.com]"},
		{"a.example.com", []string{"a.example.com", "b.example.com"}, "[a.example.com]"},
		{"*.example.com", []string{"a.example.com", "example.com", "x.a.example.com"}, "[a.example.com x.a.example.com]"},
		{"a.example.com", []string{"*.example.com"}, "[a.example.com]"},
		{"*.example.com", []string{"*.a.example.com", "*.other.com"}, "[*.a.example.com]"},
		{"*.a.example.com", []string{"*.example.com"}, "[*.a.example.com]"},
		{"a.example.com", []string{"b.example.com"}, "[]"},
	} {
		if got := fmt.Sprint(routeHostnames(tc.listener, tc.route)); got != tc.want {
			t.Errorf("routeHostnames(%q, %v) = %s, want %s", tc.listener, tc.route, got, tc.want)
		}
	}
}

// GEP-2465 listener isolation, the Gateway API suite's
// GatewayHTTPListenerIsolation with hostname intersection: four listeners
// on port 80 ("", *.example.com, *.foo.example.com, abc.foo.example.com),
// each with a route whose hostnames reach into the others'. A route
// hostname is served only through the listener that owns it, so each
// virtual host holds the routes of one listener.
func TestListenerIsolation(t *testing.T) {
	hosts := []string{"bar.com", "*.example.com", "*.foo.example.com", "abc.foo.example.com"}
	gw := &model.Gateway{Namespace: "ns", Name: "gw"}
	for i, lh := range []string{"", "*.example.com", "*.foo.example.com", "abc.foo.example.com"} {
		name := []string{"empty", "wildcard", "wildcard-foo", "abc-foo"}[i]
		gw.Listeners = append(gw.Listeners, model.Listener{Name: name, Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: lh,
			Routes: []*model.Route{httpRoute("ns", name, hosts, model.Rule{
				HTTP:     &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/" + name)}},
				Backends: []model.Backend{{Weight: 1, Service: svc("ns", "v1", 8080)}},
			})}})
	}
	res := build(t, gw, Inputs{}, Options{})
	for vh, want := range map[string]string{
		"bar.com:80":             "ns.empty.0",
		"*.example.com:80":       "ns.wildcard.0",
		"*.foo.example.com:80":   "ns.wildcard-foo.0",
		"abc.foo.example.com:80": "ns.abc-foo.0",
	} {
		rs := routesOf(t, res, "http.80", vh)
		if len(rs) != 1 || rs[0].Name != want {
			var names []string
			for _, r := range rs {
				names = append(names, r.Name)
			}
			t.Errorf("virtual host %s routes %v, want only %s", vh, names, want)
		}
	}

	// A listener hostname that no route serves still gets its virtual host
	// when a broader one would take its requests: a 404, not the routes of
	// the listener without hostname.
	gw.Listeners[3].Routes = nil
	gw.Listeners[0].Routes[0].Hostnames = nil // "*"
	res = build(t, gw, Inputs{}, Options{})
	if rs := routesOf(t, res, "http.80", "abc.foo.example.com:80"); len(rs) != 0 {
		t.Errorf("abc.foo.example.com without routes: %d routes, want an empty virtual host", len(rs))
	}
}

// Each HTTPS filter chain has its own route configuration: its listener's
// hostnames, and one virtual host answering 421 for the hostnames of the
// port's other listeners, plus "*" when the listener has a hostname.
func TestHTTPSChainRouteConfigurations(t *testing.T) {
	gw := &model.Gateway{Namespace: "ns", Name: "gw"}
	for _, l := range []struct{ name, host string }{{"any", ""}, {"second", "second.example.org"}, {"wild", "*.wildcard.org"}, {"fourth", "fourth.wildcard.org"}} {
		gw.Listeners = append(gw.Listeners, model.Listener{Name: l.name, Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: l.host,
			TLS: &model.ListenerTLS{CertificateRefs: []string{"ns/cert"}}})
	}
	gw.Listeners[0].Routes = []*model.Route{httpRoute("ns", "r", []string{"example.org"}, model.Rule{Backends: []model.Backend{{Weight: 1, Service: svc("ns", "v1", 8080)}}})}
	res := build(t, gw, Inputs{}, Options{})
	type vhost struct {
		name    string
		domains []string
	}
	got := map[string][]vhost{}
	for _, rc := range res.Routes {
		for _, v := range rc.VirtualHosts {
			got[rc.Name] = append(got[rc.Name], vhost{v.Name, v.Domains})
			if strings.HasPrefix(v.Name, "misdirected:") {
				if s := v.Routes[0].GetDirectResponse().GetStatus(); len(v.Routes) != 1 || s != 421 {
					t.Errorf("%s %s: %v, want one direct_response 421", rc.Name, v.Name, v.Routes)
				}
			}
		}
	}
	want := map[string][]vhost{
		"https.443.any":    {{"example.org:443", []string{"example.org"}}, {"misdirected:443", []string{"*.wildcard.org", "fourth.wildcard.org", "second.example.org"}}},
		"https.443.second": {{"second.example.org:443", []string{"second.example.org"}}, {"misdirected:443", []string{"*", "*.wildcard.org", "fourth.wildcard.org"}}},
		"https.443.wild":   {{"*.wildcard.org:443", []string{"*.wildcard.org"}}, {"misdirected:443", []string{"*", "fourth.wildcard.org", "second.example.org"}}},
		"https.443.fourth": {{"fourth.wildcard.org:443", []string{"fourth.wildcard.org"}}, {"misdirected:443", []string{"*", "*.wildcard.org", "second.example.org"}}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(vhost{})); diff != "" {
		t.Errorf("route configurations (-want +got):\n%s", diff)
	}
	for _, l := range res.Listeners {
		for _, fc := range l.FilterChains {
			var hcm hcmv3.HttpConnectionManager
			if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
				t.Fatal(err)
			}
			if got, want := hcm.GetRds().GetRouteConfigName(), "https.443."+fc.Name; got != want {
				t.Errorf("chain %s: RDS %q, want %q", fc.Name, got, want)
			}
		}
	}
}
