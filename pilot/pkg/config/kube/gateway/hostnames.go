// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import "strings"

// HostnamesIntersect reports whether a listener with hostname listener
// (Gateway API Listener.hostname; "" means any) accepts a route with
// hostnames route (HTTPRoute/GRPCRoute spec.hostnames; empty means any).
// They intersect when the listener or the route has no hostname, or when any
// route hostname intersects the listener's (HostnameIntersects).
func HostnamesIntersect(listener string, route []string) bool {
	if listener == "" || len(route) == 0 {
		return true
	}
	for _, h := range route {
		if HostnameIntersects(listener, h) {
			return true
		}
	}
	return false
}

// HostnameIntersects reports whether two hostnames, either of which may be a
// wildcard ("*." prefix), match a common host, in the Gateway API's rules: a
// wildcard is a suffix match over one or more labels, so "*.example.com"
// matches "foo.example.com" and "foo.bar.example.com" but not "example.com";
// two wildcards intersect when one's suffix ends with the other's. Hostnames
// compare case-insensitively.
func HostnameIntersects(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	aw, bw := strings.HasPrefix(a, "*."), strings.HasPrefix(b, "*.")
	switch {
	case !aw && !bw:
		return a == b
	case aw && bw:
		return strings.HasSuffix(a[1:], b[1:]) || strings.HasSuffix(b[1:], a[1:])
	case aw:
		return wildcardMatches(a, b)
	default:
		return wildcardMatches(b, a)
	}
}

// wildcardMatches reports whether the exact host h is under wildcard w
// ("*.suffix"): h ends with ".suffix" and has at least one label before it.
func wildcardMatches(w, h string) bool {
	suffix := w[1:] // ".suffix"
	return len(h) > len(suffix) && strings.HasSuffix(h, suffix)
}
