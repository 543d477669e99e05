// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

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

// TakenHostname is a hostname a route claims through a listener it is
// attached to, whose requests go to a more specific listener of the same
// Gateway port that the route is not attached to (Gateway API listener
// isolation: the listener whose hostname matches a request best serves it,
// core.OwnerHostname), when that listener belongs to another namespace than
// the route: a hostname take-over between tenants. The route gets no
// request for it through that parent (Conflicted=True/HostnameConflict on
// the route's parent entry); the listener that takes it says so too
// (TakesHostnames=True on its status entry).
type TakenHostname struct {
	// Hostname is the hostname (or wildcard) the route claims.
	Hostname string
	// Through is the route's listener it claims it through, of the
	// parent's Gateway or ListenerSet.
	Through gwv1.SectionName
	// By is the listener that serves it: ByName of ListenerSet BySet (zero
	// for the Gateway's own listeners), with hostname ByHostname, in
	// namespace ByNamespace (the ListenerSet's, or the Gateway's).
	ByName      gwv1.SectionName
	BySet       types.NamespacedName
	ByHostname  string
	ByNamespace string
}

// servedListeners are the listeners of gw that reach the proxies (Served)
// on port: the Gateway's own, then those of its accepted ListenerSets, as
// TranslatorGateway hands them to the translator.
func servedListeners(gw *GatewayView, port gwv1.PortNumber) []*ListenerView {
	var out []*ListenerView
	add := func(ls []ListenerView) {
		for i := range ls {
			if ls[i].Port == port && ls[i].Served() {
				out = append(out, &ls[i])
			}
		}
	}
	add(gw.Listeners)
	for i := range gw.ListenerSets {
		if gw.ListenerSets[i].Accepted() {
			add(gw.ListenerSets[i].Listeners)
		}
	}
	return out
}

// parentListeners are the listeners a parent result attaches to: those of
// its ListenerSet, or the Gateway's own.
func parentListeners(gw *GatewayView, set types.NamespacedName) []ListenerView {
	if set.Name == "" {
		return gw.Listeners
	}
	if ls := gw.ListenerSet(set); ls != nil {
		return ls.Listeners
	}
	return nil
}

// markTakenHostnames sets Taken on route's accepted results that name gw:
// for each served listener a result attaches to and each hostname the
// route serves through it (core.RouteHostnames), the hostname is taken
// when the listener that owns it on that port (core.OwnerHostname over
// every served listener of gw, the Gateway's and its ListenerSets' alike)
// is another one, which none of the route's results attaches to, of a
// namespace other than the route's. Between listeners of one namespace
// (the route's), listener isolation is the configuration's own choice and
// nothing is marked.
func markTakenHostnames(route Route, gwKey types.NamespacedName, gw *GatewayView, results []ParentResult) {
	hostnames := make([]string, len(route.Hostnames))
	for i, h := range route.Hostnames {
		hostnames[i] = string(h)
	}
	attached := func(set types.NamespacedName, name gwv1.SectionName) bool {
		for _, r := range results {
			if r.Accepted && r.Gateway == gwKey && r.ListenerSet == set && slices.Contains(r.Listeners, name) {
				return true
			}
		}
		return false
	}
	for i := range results {
		r := &results[i]
		if !r.Accepted || r.Gateway != gwKey {
			continue
		}
		r.Taken = nil
		own := parentListeners(gw, r.ListenerSet)
		for _, name := range r.Listeners {
			var l *ListenerView
			for j := range own {
				if own[j].Name == name {
					l = &own[j]
				}
			}
			if l == nil || !l.Served() {
				continue
			}
			served := servedListeners(gw, l.Port)
			hosts := make([]string, len(served))
			for j, s := range served {
				hosts[j] = s.Hostname
			}
			for _, h := range core.RouteHostnames(l.Hostname, hostnames) {
				owner := core.OwnerHostname(h, hosts)
				if owner == l.Hostname {
					continue
				}
				var by *ListenerView
				for _, s := range served {
					if s.Hostname == owner {
						by = s
						break
					}
				}
				if by == nil || attached(by.Set, by.Name) || by.Namespace == route.Namespace {
					continue
				}
				r.Taken = append(r.Taken, TakenHostname{Hostname: h, Through: l.Name,
					ByName: by.Name, BySet: by.Set, ByHostname: by.Hostname, ByNamespace: by.Namespace})
			}
		}
	}
}

// takenMessage is the route parent entry's Conflicted message for taken.
func takenMessage(gw types.NamespacedName, taken []TakenHostname) string {
	parts := make([]string, 0, len(taken))
	for _, t := range taken {
		by := fmt.Sprintf("listener %s of Gateway %s", t.ByName, gw)
		if t.BySet.Name != "" {
			by = fmt.Sprintf("listener %s of ListenerSet %s", t.ByName, t.BySet)
		}
		parts = append(parts, fmt.Sprintf("requests for %s, which this route claims through listener %s, go to %s, whose hostname %q is more specific",
			t.Hostname, t.Through, by, t.ByHostname))
	}
	return strings.Join(parts, "; ") +
		" (the most specific listener hostname wins a request: Gateway API listener isolation); this route gets none of them here"
}

// TakesHostnamesCondition is the condition type on a listener's status
// entry, True while the listener takes hostnames that routes of other
// namespaces claim through less specific listeners (TakenHostname).
const TakesHostnamesCondition = "TakesHostnames"

// ListenerTakeovers summarizes, per listener of Gateway gw (its own under
// a zero ListenerSet key), the hostnames it takes from routes of other
// namespaces: results[i] are route i's results. Each listener's hostnames
// are sorted and unique; Routes counts the routes they are taken from.
func ListenerTakeovers(gw types.NamespacedName, results [][]ParentResult) map[types.NamespacedName]map[gwv1.SectionName]Takeover {
	out := map[types.NamespacedName]map[gwv1.SectionName]Takeover{}
	type listener struct {
		set  types.NamespacedName
		name gwv1.SectionName
	}
	for _, route := range results {
		var counted []listener // this route's takers so far
		for _, r := range route {
			if r.Gateway != gw {
				continue
			}
			for _, t := range r.Taken {
				if out[t.BySet] == nil {
					out[t.BySet] = map[gwv1.SectionName]Takeover{}
				}
				to := out[t.BySet][t.ByName]
				if !slices.Contains(to.Hostnames, t.Hostname) {
					to.Hostnames = append(to.Hostnames, t.Hostname)
					slices.Sort(to.Hostnames)
				}
				if l := (listener{t.BySet, t.ByName}); !slices.Contains(counted, l) {
					counted = append(counted, l)
					to.Routes++
				}
				out[t.BySet][t.ByName] = to
			}
		}
	}
	return out
}

// Takeover is what one listener takes (ListenerTakeovers).
type Takeover struct {
	Hostnames []string
	Routes    int
}

// condition is the listener's TakesHostnames=True condition. Its message
// names the hostnames and how many routes lose them, not the routes: the
// listener's owner may be another tenant than theirs (GEP-1713 asks not to
// leak siblings' details), while each losing route names the listener.
func (t Takeover) condition(generation int64) metav1.Condition {
	return metav1.Condition{Type: TakesHostnamesCondition, Status: metav1.ConditionTrue,
		Reason: string(gwv1.ListenerReasonHostnameConflict), ObservedGeneration: generation,
		Message: fmt.Sprintf("takes %s from %d route(s) of other namespaces attached through less specific listeners: "+
			"the most specific listener hostname wins a request (Gateway API listener isolation), so they get none of them",
			strings.Join(t.Hostnames, ", "), t.Routes)}
}

// RouteConflictedCondition is the condition type on a route's parent entry
// that is True (reason HostnameConflict) while hostnames it claims there
// are taken by a more specific listener of another namespace.
const RouteConflictedCondition = "Conflicted"

// withGatewayTakeovers adds TakesHostnames=True to the status entry of each
// of the Gateway's own listeners in to.
func withGatewayTakeovers(st *gwv1.GatewayStatus, to map[gwv1.SectionName]Takeover, generation int64) {
	for i := range st.Listeners {
		if t, ok := to[st.Listeners[i].Name]; ok {
			st.Listeners[i].Conditions = append(st.Listeners[i].Conditions, t.condition(generation))
		}
	}
}

// withListenerSetTakeovers adds TakesHostnames=True to the status entry of
// each of a ListenerSet's listeners in to.
func withListenerSetTakeovers(st *gwv1.ListenerSetStatus, to map[gwv1.SectionName]Takeover, generation int64) {
	for i := range st.Listeners {
		if t, ok := to[st.Listeners[i].Name]; ok {
			st.Listeners[i].Conditions = append(st.Listeners[i].Conditions, t.condition(generation))
		}
	}
}
