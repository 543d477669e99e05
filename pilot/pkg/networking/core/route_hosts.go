// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"sort"
	"strings"
)

// routeHostnames is the Gateway API intersection of a listener hostname and
// a route's spec.hostnames: the hostnames the route serves on that listener.
//
//   - A listener without hostname ("") accepts every route hostname; a route
//     without hostnames takes the listener's, or "*" when the listener has
//     none.
//   - Exact hostnames intersect when equal; a wildcard ("*.example.com")
//     intersects an exact hostname it covers (the exact one is served) and
//     another wildcard it covers or is covered by (the narrower is served).
//
// The result is sorted and de-duplicated; empty means the route does not
// attach through this listener.
func routeHostnames(listenerHost string, routeHosts []string) []string {
	var out []string
	switch {
	case len(routeHosts) == 0 && listenerHost == "":
		out = []string{"*"}
	case len(routeHosts) == 0:
		out = []string{listenerHost}
	case listenerHost == "":
		out = append(out, routeHosts...)
	default:
		for _, h := range routeHosts {
			if m, ok := intersectHost(listenerHost, h); ok {
				out = append(out, m)
			}
		}
	}
	sort.Strings(out)
	return dedupSorted(out)
}

// intersectHost returns the narrower of a and b when one covers the other.
func intersectHost(a, b string) (string, bool) {
	if a == b {
		return a, true
	}
	if covers(a, b) {
		return b, true
	}
	if covers(b, a) {
		return a, true
	}
	return "", false
}

// covers reports whether wildcard w ("*.suffix") matches h, which must have
// at least one more label than the suffix ("*.example.com" covers
// "a.example.com" and "*.a.example.com", not "example.com").
func covers(w, h string) bool {
	if !strings.HasPrefix(w, "*.") {
		return false
	}
	suffix := w[1:] // ".example.com"
	if !strings.HasSuffix(h, suffix) {
		return false
	}
	rest := strings.TrimSuffix(h, suffix)
	return rest != "" && rest != "*"
}

func dedupSorted(s []string) []string {
	if len(s) < 2 {
		return s
	}
	out := s[:1]
	for _, v := range s[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

// RouteHostnames is routeHostnames for the controller: the hostnames a
// route serves through a listener with hostname listenerHost, before
// listener isolation (OwnerHostname) takes those another listener owns.
func RouteHostnames(listenerHost string, routeHosts []string) []string {
	return routeHostnames(listenerHost, routeHosts)
}

// OwnerHostname is the hostname of the listener that owns requests for
// Host pattern h among the hostnames of a port's served listeners (Gateway
// API listener isolation, GEP-2465): an exact match first, then the
// wildcard with the most labels that covers h, then the listener without
// hostname (""). The translator serves h only through that listener; the
// controller says so in status (the same function, so both agree).
func OwnerHostname(h string, listenerHosts []string) string { return ownerHostname(h, listenerHosts) }
