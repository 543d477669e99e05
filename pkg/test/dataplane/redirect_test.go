// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/http"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
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

	// With strip_any_host_port the connection manager removes the port
	// from Host itself (HeaderUtility::stripPortFromHost), so a scheme
	// change no longer has a port to keep.
	dp = newTestDP(t, Options{})
	load(t, dp, rc(vh), stripAnyHostPort(t, seedListener(t)))
	resp := get(t, dp, 80, "GET", "gw.example.com:8080", "/scheme", nil)
	if got, want := resp.Header.Get("Location"), "https://gw.example.com/scheme"; got != want {
		t.Errorf("strip_any_host_port, /scheme with Host gw.example.com:8080: Location %q, want %q", got, want)
	}
}

// strip_any_host_port rewrites the request's Host itself before routing
// (ConnectionManagerUtility::maybeNormalizeHost, then
// HeaderUtility::stripPortFromHost, source/common/http/header_utility.cc;
// HttpConnectionManager.strip_any_host_port in the API reference): the
// upstream sees Host without the port; a port that is not a number, or a
// colon inside an IPv6 literal, is left as it is. ignore_port_in_host_matching
// (RouteConfiguration API reference; RouteMatcher::findVirtualHost in
// source/common/router/config_impl.cc) leaves the port out of virtual host
// selection only.
func TestStripAnyHostPortRewritesHost(t *testing.T) {
	for host, want := range map[string]string{
		"x.example.com:8080": "x.example.com",
		"x.example.com":      "x.example.com",
		"[2001:db8::1]:443":  "[2001:db8::1]",
		"[2001:db8::1]":      "[2001:db8::1]",
		"x.example.com:http": "x.example.com:http",
	} {
		if got := stripHostPort(host); got != want {
			t.Errorf("stripHostPort(%q) = %q, want %q", host, got, want)
		}
	}
	dp := newTestDP(t, Options{})
	a := backend(t, "a")
	load(t, dp, edsCluster(t, "ca", false), cla("ca", a.Listener.Addr().String()),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{Match: prefix("/"), Action: toCluster("ca")}}}),
		stripAnyHostPort(t, seedListener(t)))
	if resp := get(t, dp, 80, "GET", "x.example.com:8080", "/", nil); resp.Header.Get("x-seen-host") != "x.example.com" || resp.Header.Get("x-seen-xfp") != "http" {
		t.Errorf("upstream Host %q, x-forwarded-proto %q; want x.example.com (port stripped by the connection manager), http",
			resp.Header.Get("x-seen-host"), resp.Header.Get("x-seen-xfp"))
	}

	// Without it (core's listeners), the port reaches the upstream, and
	// ignore_port_in_host_matching leaves it out of virtual host selection
	// only (RouteMatcher::findVirtualHost).
	dp = newTestDP(t, Options{})
	load(t, dp, edsCluster(t, "ca", false), cla("ca", a.Listener.Addr().String()),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"x.example.com"}, Routes: []*routev3.Route{{Match: prefix("/"), Action: toCluster("ca")}}}),
		seedListener(t))
	if got := get(t, dp, 80, "GET", "x.example.com:8080", "/", nil).Header.Get("x-seen-host"); got != "x.example.com:8080" {
		t.Errorf("upstream Host %q, want x.example.com:8080 (kept; matched without its port)", got)
	}

	// Without ignore_port_in_host_matching the port is part of the name
	// matched against domains: x.example.com:8080 is not x.example.com.
	strict := rc(&routev3.VirtualHost{Name: "v", Domains: []string{"x.example.com"}, Routes: []*routev3.Route{{Match: prefix("/"), Action: toCluster("ca")}}})
	strict.IgnorePortInHostMatching = false
	load(t, dp, strict)
	if resp := get(t, dp, 80, "GET", "x.example.com:8080", "/", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("ignore_port_in_host_matching false, Host x.example.com:8080: %d, want 404", resp.StatusCode)
	}
	if resp := get(t, dp, 80, "GET", "x.example.com", "/", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("ignore_port_in_host_matching false, Host x.example.com: %d, want 200", resp.StatusCode)
	}
}

// stripAnyHostPort returns l with strip_any_host_port set in its HCM.
func stripAnyHostPort(t *testing.T, l *listenerv3.Listener) *listenerv3.Listener {
	t.Helper()
	l.FilterChains[0].Filters[0] = setHCM(t, l.FilterChains[0].Filters[0], func(h *hcmv3.HttpConnectionManager) {
		h.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true}
	})
	return l
}
