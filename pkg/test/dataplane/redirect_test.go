// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// Location of a route redirect, as Envoy's Http::Utility::newUri builds it
// (source/common/http/utility.cc): host_redirect replaces the request's
// whole Host, port included; port_redirect is always written, even when it
// is the scheme's well-known port; without host_redirect the request's Host
// keeps its port unless a port_redirect is given or the scheme changes from
// x-forwarded-proto's and the port is that scheme's default
// (processRequestHost). The Gateway API suite's HTTPRouteRedirectPortAndScheme
// sends Host with the listener's port (8080) and expects it gone when the
// filter names a hostname.
func TestRedirectLocationAsEnvoy(t *testing.T) {
	redirect := func(path string, ra *routev3.RedirectAction) *routev3.Route {
		return &routev3.Route{Match: prefix(path), Action: &routev3.Route_Redirect{Redirect: ra}}
	}
	https := &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: "https"}
	vh := &routev3.VirtualHost{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{
		redirect("/host-port-80", &routev3.RedirectAction{HostRedirect: "example.org", PortRedirect: 80}),
		redirect("/port", &routev3.RedirectAction{PortRedirect: 9090}),
		redirect("/scheme", &routev3.RedirectAction{SchemeRewriteSpecifier: https}),
		redirect("/host-scheme", &routev3.RedirectAction{HostRedirect: "example.org", SchemeRewriteSpecifier: https}),
		redirect("/host", &routev3.RedirectAction{HostRedirect: "example.org"}), // after the longer prefixes
	}}
	dp := newTestDP(t, Options{})
	load(t, dp, rc(vh), seedListener(t))

	for _, tc := range []struct {
		path, host, want string
	}{
		{"/host", "gw.example.com:8080", "http://example.org/host"},
		{"/host", "gw.example.com", "http://example.org/host"},
		{"/host-port-80", "gw.example.com:8080", "http://example.org:80/host-port-80"},
		{"/port", "gw.example.com:8080", "http://gw.example.com:9090/port"},
		{"/port", "[2001:db8::1]:8080", "http://[2001:db8::1]:9090/port"},
		{"/scheme", "gw.example.com:8080", "https://gw.example.com:8080/scheme"}, // not http's default port: kept
		{"/scheme", "gw.example.com:80", "https://gw.example.com/scheme"},        // http's default port: dropped
		{"/scheme", "gw.example.com", "https://gw.example.com/scheme"},
		{"/host-scheme", "gw.example.com:8080", "https://example.org/host-scheme"},
	} {
		resp := get(t, dp, 80, "GET", tc.host, tc.path, nil)
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != tc.want {
			t.Errorf("%s with Host %s: %d Location %q; want 301 %q", tc.path, tc.host, resp.StatusCode, resp.Header.Get("Location"), tc.want)
		}
	}
}
