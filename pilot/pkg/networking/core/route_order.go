// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"sort"
	"strings"
	"time"
)

// Path match kinds, most specific first in route order. pathGRPC is every
// GRPCRoute match: those are ordered among themselves by service, then
// method length (grpcPathLen), not by match type.
const (
	pathGRPC = iota
	pathPrefix
	pathRegex
	pathExact
)

// grpcPathLen is the pathLen of a GRPCRoute match: the Gateway API orders
// GRPCRoute rules by the characters of the matching service, then of the
// method (each at most 1,024 by the CRD's validation).
func grpcPathLen(service, method string) int { return len(service)*4096 + len(method) }

// orderKey places one Envoy route (one match of one rule) among the others
// of its virtual host. Envoy takes the first route that matches, so routes
// are sorted by the Gateway API's HTTPRouteRule matching precedence:
//
//  0. the route's own hostname that matches the virtual host's, not the
//     listener/route intersection (GatewayRouteHostnameIntersectionPrecedence,
//     HTTPRouteSpec.hostnames): the most characters of a non-wildcard
//     hostname, then the most characters of a hostname; a route without
//     hostnames matches with none, so after every route that names one;
//  1. an Exact path match, then a RegularExpression path (implementation
//     specific; we put it above prefixes so a regex is not shadowed by "/"),
//     longer patterns first, then a PathPrefix match, longest prefix first;
//  2. a method match;
//  3. the most header matches;
//  4. the most query parameter matches;
//  5. the oldest route (creationTimestamp);
//  6. namespace/name alphabetically;
//  7. rule index, then match index, within the route;
//  8. a rule's CORS preflight route (preflightRoute) just before the route
//     it was made from: it matches a subset of the same requests.
//
// GRPCRoute matches (GRPCRouteRule precedence) use pathGRPC and order by
// the service's characters, then the method's, before headers.
type orderKey struct {
	// hostExact and hostLen are the characters of the route's matching
	// hostname when it is not a wildcard (else 0), and of it in any case
	// (hostKey); set per virtual host.
	hostExact int
	hostLen   int
	pathKind  int
	pathLen   int
	method    bool
	headers   int
	queries   int
	created   time.Time
	nsName    string
	kind      string
	ruleIndex int
	match     int
	preflight bool
}

func (a orderKey) less(b orderKey) bool {
	if a.hostExact != b.hostExact {
		return a.hostExact > b.hostExact
	}
	if a.hostLen != b.hostLen {
		return a.hostLen > b.hostLen
	}
	if a.pathKind != b.pathKind {
		return a.pathKind > b.pathKind
	}
	if a.pathLen != b.pathLen {
		return a.pathLen > b.pathLen
	}
	if a.method != b.method {
		return a.method
	}
	if a.headers != b.headers {
		return a.headers > b.headers
	}
	if a.queries != b.queries {
		return a.queries > b.queries
	}
	if !a.created.Equal(b.created) {
		return a.created.Before(b.created)
	}
	if a.nsName != b.nsName {
		return a.nsName < b.nsName
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	if a.ruleIndex != b.ruleIndex {
		return a.ruleIndex < b.ruleIndex
	}
	if a.match != b.match {
		return a.match < b.match
	}
	return a.preflight && !b.preflight
}

// hostKey returns the hostExact and hostLen of a route whose spec.hostnames
// are routeHosts in the virtual host of hostname vh: of the route's
// hostnames that match vh (equal to it, or a wildcard covering it or
// covered by it, as routeHostnames intersects), the most specific. A route
// without hostnames, or "*" alone, gives 0, 0.
func hostKey(vh string, routeHosts []string) (exact, chars int) {
	for _, h := range routeHosts {
		if h == "*" {
			continue
		}
		if _, ok := intersectHost(vh, h); !ok && vh != "*" {
			continue
		}
		e := 0
		if !strings.HasPrefix(h, "*") {
			e = len(h)
		}
		if e > exact || (e == exact && len(h) > chars) {
			exact, chars = e, len(h)
		}
	}
	return exact, chars
}

// withHostKey returns copies of entries (a route's, built once) keyed for
// the virtual host of hostname vh (hostKey).
func withHostKey(entries []routeEntry, vh string, routeHosts []string) []routeEntry {
	exact, chars := hostKey(vh, routeHosts)
	out := make([]routeEntry, len(entries))
	for i, e := range entries {
		e.key.hostExact, e.key.hostLen = exact, chars
		out[i] = e
	}
	return out
}

// sortEntries sorts in place by orderKey; the key is total, so the order is
// deterministic.
func sortEntries(e []routeEntry) {
	sort.SliceStable(e, func(i, j int) bool { return e[i].key.less(e[j].key) })
}
