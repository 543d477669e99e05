// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

// The oracle of TestFileModeServesWhatStatusReports: status -f's printed
// documents read back (parsePrintedStatus), the listeners and route
// attachments they report for a Gateway (claimedListeners,
// routeAttachments), and their comparison with what the Gateway's proxy is
// served (compareServed).

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// printedStatus is what status -f printed, by kind and namespace/name.
type printedStatus struct {
	gateways     map[string]gwv1.GatewayStatus
	listenerSets map[string]gwv1.ListenerSetStatus
	// routes are keyed "Kind namespace/name".
	routes map[string]gwv1.RouteStatus
}

func parsePrintedStatus(t *testing.T, out string) printedStatus {
	t.Helper()
	st := printedStatus{gateways: map[string]gwv1.GatewayStatus{}, listenerSets: map[string]gwv1.ListenerSetStatus{},
		routes: map[string]gwv1.RouteStatus{}}
	for _, d := range strings.Split(out, "---\n") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		var doc struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
			Status   json.RawMessage   `json:"status"`
		}
		if err := yaml.Unmarshal([]byte(d), &doc); err != nil {
			t.Fatalf("status -f printed a document that is not YAML: %v\n%s", err, d)
		}
		key := doc.Metadata.Namespace + "/" + doc.Metadata.Name
		var err error
		switch doc.Kind {
		case "Gateway":
			var s gwv1.GatewayStatus
			err = json.Unmarshal(doc.Status, &s)
			st.gateways[key] = s
		case "ListenerSet":
			var s gwv1.ListenerSetStatus
			err = json.Unmarshal(doc.Status, &s)
			st.listenerSets[key] = s
		case "HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute":
			var s gwv1.RouteStatus
			err = json.Unmarshal(doc.Status, &s)
			st.routes[doc.Kind+" "+key] = s
		}
		if err != nil {
			t.Fatalf("%s %s: status: %v", doc.Kind, key, err)
		}
	}
	return st
}

// conditionIs reports whether conds has a condition typ with status and,
// when reasons are given, one of them.
func conditionIs(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reasons ...string) bool {
	c := findCondition(conds, typ)
	return c != nil && c.Status == status && (len(reasons) == 0 || slices.Contains(reasons, c.Reason))
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// claimsServed reports whether a listener's status says it is served:
// Accepted=True, and Programmed=True or, offline where nothing is
// deployed, False/Pending (it would be programmed once the deployment is
// ready; Invalid says it will not be).
func claimsServed(conds []metav1.Condition) bool {
	return conditionIs(conds, "Accepted", metav1.ConditionTrue) &&
		(conditionIs(conds, "Programmed", metav1.ConditionTrue) ||
			conditionIs(conds, "Programmed", metav1.ConditionFalse, string(gwv1.ListenerReasonPending)))
}

// listenerClaim is one listener status -f reports for a Gateway (its own,
// or one of its ListenerSets'), with the listener's spec.
type listenerClaim struct {
	// parent is "Gateway ns/name" or "ListenerSet ns/name", as route
	// status messages name it.
	parent   string
	name     string
	port     uint32
	protocol gwv1.ProtocolType
	hostname string
	// terminate: a TLS listener in mode Terminate (its chains terminate
	// TLS); a Passthrough one's never do.
	terminate bool
	attached  int32
	// served: status says the listener is served (claimsServed, its
	// Gateway and ListenerSet accepted).
	served bool
	// filtered: the listener has listener filters (filters.requests), so
	// its virtual host ends with the 404 catch-all route
	// (core.ListenerFilterFallbackRoute); filterRefused: status says they
	// do not resolve (ResolvedRefs=False/InvalidListenerFilterRef), so it
	// is served with the 500 route (core.ListenerFilterErrorRoute) only,
	// none of its routes'.
	filtered, filterRefused bool
}

func (l listenerClaim) String() string {
	return fmt.Sprintf("%s listener %s (port %d %s, hostname %q)", l.parent, l.name, l.port, l.protocol, l.hostname)
}

// claimedListeners are the listeners status reports for gw (gst): its own
// and those of every ListenerSet whose parentRef names it.
func claimedListeners(t *testing.T, src *file.Source, st printedStatus, gw *gwv1.Gateway, gst gwv1.GatewayStatus) []listenerClaim {
	t.Helper()
	gwAccepted := conditionIs(gst.Conditions, "Accepted", metav1.ConditionTrue)
	var out []listenerClaim
	add := func(parent string, specs []gwv1.Listener, statuses []gwv1.ListenerStatus, accepted bool) {
		for _, ls := range statuses {
			i := slices.IndexFunc(specs, func(l gwv1.Listener) bool { return l.Name == ls.Name })
			if i < 0 {
				t.Errorf("%s: status -f reports listener %s, which the spec does not have", parent, ls.Name)
				continue
			}
			spec := specs[i]
			out = append(out, listenerClaim{parent: parent, name: string(ls.Name), port: uint32(spec.Port), protocol: spec.Protocol,
				hostname: string(ptr.Deref(spec.Hostname, "")), attached: ls.AttachedRoutes,
				terminate: spec.Protocol == gwv1.TLSProtocolType && spec.TLS != nil &&
					ptr.Deref(spec.TLS.Mode, gwv1.TLSModeTerminate) == gwv1.TLSModeTerminate,
				served:   accepted && claimsServed(ls.Conditions),
				filtered: spec.Filters != nil && len(spec.Filters.Requests) > 0,
				filterRefused: slices.ContainsFunc(ls.Conditions, func(c metav1.Condition) bool {
					return c.Type == string(gwv1.ListenerConditionResolvedRefs) && c.Status == metav1.ConditionFalse &&
						c.Reason == string(gateway.ListenerReasonInvalidListenerFilterRef)
				})})
		}
	}
	key := gw.Namespace + "/" + gw.Name
	add("Gateway "+key, gw.Spec.Listeners, gst.Listeners, gwAccepted)
	for _, ls := range src.ListenerSets().List() {
		ref := ls.Spec.ParentRef
		if string(ptr.Deref(ref.Kind, "Gateway")) != "Gateway" || string(ptr.Deref(ref.Group, gwv1.GroupName)) != gwv1.GroupName ||
			string(ptr.Deref(ref.Namespace, gwv1.Namespace(ls.Namespace)))+"/"+string(ref.Name) != key {
			continue
		}
		lsKey := ls.Namespace + "/" + ls.Name
		lst, ok := st.listenerSets[lsKey]
		if !ok {
			t.Errorf("ListenerSet %s names Gateway %s of ours, but status -f reports nothing for it", lsKey, key)
			continue
		}
		specs := make([]gwv1.Listener, len(ls.Spec.Listeners))
		for i, e := range ls.Spec.Listeners {
			specs[i] = gwv1.Listener(e)
		}
		statuses := make([]gwv1.ListenerStatus, len(lst.Listeners))
		for i, e := range lst.Listeners {
			statuses[i] = gwv1.ListenerStatus{Name: e.Name, AttachedRoutes: e.AttachedRoutes, Conditions: e.Conditions}
		}
		add("ListenerSet "+lsKey, specs, statuses, gwAccepted && conditionIs(lst.Conditions, "Accepted", metav1.ConditionTrue))
	}
	return out
}

// routeAttachment is one route status reports attached, through an
// accepted parentRef, to listeners of the Gateway.
type routeAttachment struct {
	kind, namespace, name string
	// parent is "Gateway ns/name" or "ListenerSet ns/name"; listeners are
	// those the Accepted condition's message names.
	parent    string
	listeners []string
	hostnames []string
	rules     int
	// dropped are the rules PartiallyInvalid names.
	dropped []int
}

// attachedMessage is the Accepted condition's message of a route's parent
// (attachToListeners): which listeners of which parent it attached to.
var attachedMessage = regexp.MustCompile(`^attached to (Gateway|ListenerSet) (\S+) listener\(s\) (.+)$`)

// droppedRule finds the rule indexes in a PartiallyInvalid message
// (DroppedRulesMessage: "Dropped Rule(s): rule 1: ...; rule 3: ...").
var droppedRule = regexp.MustCompile(`(?:^Dropped Rule\(s\): |; )rule (\d+): `)

// routeAttachments are the routes status reports attached to Gateway gw
// or to one of its ListenerSets.
func routeAttachments(t *testing.T, src *file.Source, st printedStatus, gw string) []routeAttachment {
	t.Helper()
	setParent := map[string]string{}
	for _, ls := range src.ListenerSets().List() {
		ref := ls.Spec.ParentRef
		setParent[ls.Namespace+"/"+ls.Name] = string(ptr.Deref(ref.Namespace, gwv1.Namespace(ls.Namespace))) + "/" + string(ref.Name)
	}
	var out []routeAttachment
	for k, rs := range st.routes {
		kind, key, _ := strings.Cut(k, " ")
		ns, name, _ := strings.Cut(key, "/")
		var hostnames []gwv1.Hostname
		rules := 0
		switch kind {
		case "HTTPRoute":
			r := src.HTTPRoutes().GetKey(key)
			if r == nil {
				t.Errorf("status -f reports %s, which is not among the manifests", k)
				continue
			}
			hostnames, rules = (*r).Spec.Hostnames, len((*r).Spec.Rules)
		case "GRPCRoute":
			r := src.GRPCRoutes().GetKey(key)
			if r == nil {
				t.Errorf("status -f reports %s, which is not among the manifests", k)
				continue
			}
			hostnames, rules = (*r).Spec.Hostnames, len((*r).Spec.Rules)
		case "TLSRoute":
			r := src.TLSRoutes().GetKey(key)
			if r == nil {
				t.Errorf("status -f reports %s, which is not among the manifests", k)
				continue
			}
			hostnames, rules = (*r).Spec.Hostnames, len((*r).Spec.Rules)
		case "TCPRoute":
			r := src.TCPRoutes().GetKey(key)
			if r == nil {
				t.Errorf("status -f reports %s, which is not among the manifests", k)
				continue
			}
			rules = len((*r).Spec.Rules)
		}
		for _, p := range rs.Parents {
			ref := p.ParentRef
			refKind := string(ptr.Deref(ref.Kind, "Gateway"))
			refKey := string(ptr.Deref(ref.Namespace, gwv1.Namespace(ns))) + "/" + string(ref.Name)
			switch {
			case refKind == "Gateway" && refKey == gw:
			case refKind == "ListenerSet" && setParent[refKey] == gw:
			default:
				continue
			}
			accepted := findCondition(p.Conditions, "Accepted")
			if accepted == nil || accepted.Status != metav1.ConditionTrue {
				continue
			}
			m := attachedMessage.FindStringSubmatch(accepted.Message)
			if m == nil || m[1] != refKind || m[2] != refKey {
				t.Errorf("%s: parent %s %s is Accepted, but its message does not name the listeners it attached to: %q",
					k, refKind, refKey, accepted.Message)
				continue
			}
			a := routeAttachment{kind: kind, namespace: ns, name: name, parent: refKind + " " + refKey,
				listeners: strings.Split(m[3], ", "), rules: rules}
			for _, h := range hostnames {
				a.hostnames = append(a.hostnames, string(h))
			}
			if c := findCondition(p.Conditions, "PartiallyInvalid"); c != nil && c.Status == metav1.ConditionTrue {
				for _, d := range droppedRule.FindAllStringSubmatch(c.Message, -1) {
					i, _ := strconv.Atoi(d[1])
					a.dropped = append(a.dropped, i)
				}
			}
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b routeAttachment) int {
		return strings.Compare(a.kind+a.namespace+"/"+a.name+a.parent, b.kind+b.namespace+"/"+b.name+b.parent)
	})
	return out
}

// servedChain is one filter chain of a served listener: its SNI server
// names and the route configuration it fetches.
type servedChain struct {
	serverNames []string
	rds         string
}

// compareServed checks what discovery -f serves to Gateway gw's proxy
// (served) against what status -f reports (claims, attachments):
//
//   - status itself: each listener's attachedRoutes is the number of
//     routes whose Accepted message names it (or the oracle below reads
//     status wrong);
//   - listeners: a port is served exactly when status says some listener
//     on it is; each such HTTPS listener has its own filter chain (SNI its
//     hostname, none without one) and no other chain is served; each
//     served listener's route configuration is served;
//   - routes, status to served: every rule (not dropped) of every route
//     attached to a served listener L is in L's route configuration, under
//     each hostname the route gets on L: the intersection of the route's
//     and the listener's hostnames (the listener's, or "*", when the route
//     has none), less the hostnames a more specific listener on the port
//     owns (GEP-2465 listener isolation);
//   - routes, served to status: every Envoy route served (named
//     "<namespace>.<name>.<rule>") is such a rule under such a hostname;
//     nothing is served that status says is refused, dropped, or attached
//     elsewhere.
//
// Envoy route names do not carry the kind, so an HTTPRoute and a GRPCRoute
// of one namespace and name count as one route here. It returns the number
// of route rules (per route configuration and hostname) status says are
// served.
func compareServed(t *testing.T, gw string, claims []listenerClaim, attachments []routeAttachment, served proxyResources) int {
	t.Helper()
	// Status's own attachedRoutes against the attachments read from it.
	for _, l := range claims {
		n := 0
		for _, a := range attachments {
			if a.parent == l.parent && slices.Contains(a.listeners, l.name) {
				n++
			}
		}
		if int32(n) != l.attached {
			t.Errorf("Gateway %s: %s has attachedRoutes %d, but %d accepted routes name it", gw, l, l.attached, n)
		}
	}
	rcOf := compareListeners(t, gw, claims, served)
	return compareRoutes(t, gw, claims, attachments, rcOf, served.Routes) + compareStreams(t, gw, claims, attachments, served)
}

// compareListeners checks the served listeners and filter chains against
// the listeners status says are served, and returns the name of the route
// configuration serving each of those it finds served.
func compareListeners(t *testing.T, gw string, claims []listenerClaim, served proxyResources) map[listenerClaim]string {
	t.Helper()
	chains := map[uint32][]servedChain{}
	for _, sl := range served.Listeners {
		port := sl.GetAddress().GetSocketAddress().GetPortValue()
		for _, fc := range sl.GetFilterChains() {
			chains[port] = append(chains[port], servedChain{serverNames: fc.GetFilterChainMatch().GetServerNames(), rds: chainRDS(fc)})
		}
	}
	claimedPorts := map[uint32]bool{}
	for _, l := range claims {
		if l.served {
			claimedPorts[l.port] = true
		}
	}
	for port, cs := range chains {
		if !claimedPorts[port] {
			t.Errorf("Gateway %s: discovery -f serves port %d, where status -f reports no served listener (%s)", gw, port, describeClaims(claims, port))
		}
		if streamPort(claims, port) {
			continue // compareStreams
		}
		https := 0
		for _, l := range claims {
			if l.served && l.port == port && l.protocol == gwv1.HTTPSProtocolType {
				https++
			}
		}
		if https > 0 && len(cs) != https {
			t.Errorf("Gateway %s: port %d: status -f reports %d served HTTPS listeners, discovery -f serves %d filter chains", gw, port, https, len(cs))
		}
	}
	rcs := map[string]bool{}
	for _, rc := range served.Routes {
		rcs[rc.GetName()] = true
	}
	rcOf := map[listenerClaim]string{}
	for _, l := range claims {
		if !l.served || streamPort(claims, l.port) {
			continue
		}
		cs, ok := chains[l.port]
		if !ok {
			t.Errorf("Gateway %s: status -f says %s is served; discovery -f serves nothing on port %d", gw, l, l.port)
			continue
		}
		var match []servedChain
		for _, c := range cs {
			if l.protocol != gwv1.HTTPSProtocolType || slices.Equal(c.serverNames, hostnameList(l.hostname)) {
				match = append(match, c)
			}
		}
		if len(match) != 1 {
			t.Errorf("Gateway %s: %s: want one filter chain for it, discovery -f serves %d (%+v)", gw, l, len(match), cs)
			continue
		}
		if !rcs[match[0].rds] {
			t.Errorf("Gateway %s: %s: its route configuration %q is not served", gw, l, match[0].rds)
			continue
		}
		rcOf[l] = match[0].rds
	}
	return rcOf
}

// filterRoute is the route that ends each virtual host of a listener with
// listener filters: the 404 catch-all, or the 500 route when they do not
// resolve.
func filterRoute(l listenerClaim) string {
	if l.filterRefused {
		return core.ListenerFilterErrorRoute
	}
	return core.ListenerFilterFallbackRoute
}

// hostOrStar is a listener's hostname as a virtual host domain: "*" for
// none.
func hostOrStar(h string) string {
	if h == "" {
		return "*"
	}
	return h
}

// servedRoute is one Envoy route, by route configuration, virtual host
// domain and name.
type servedRoute struct{ rc, host, name string }

// compareRoutes checks, both ways, the route rules status says each served
// listener (rcOf) gets against the Envoy routes in routes, and returns how
// many status says are served.
func compareRoutes(t *testing.T, gw string, claims []listenerClaim, attachments []routeAttachment, rcOf map[listenerClaim]string,
	routes []*routev3.RouteConfiguration) int {
	t.Helper()
	want := map[servedRoute][]string{} // -> why
	for _, a := range attachments {
		for _, ln := range a.listeners {
			i := slices.IndexFunc(claims, func(l listenerClaim) bool { return l.parent == a.parent && l.name == ln })
			if i < 0 {
				t.Errorf("Gateway %s: %s %s/%s attaches to %s listener %s, which status -f does not report", gw, a.kind, a.namespace, a.name, a.parent, ln)
				continue
			}
			l := claims[i]
			rc, ok := rcOf[l]
			if !ok {
				continue // not served, or already reported
			}
			var portHosts []string
			for _, o := range claims {
				if o.served && o.port == l.port {
					portHosts = append(portHosts, o.hostname)
				}
			}
			for _, h := range intersectHostnames(l.hostname, a.hostnames) {
				if ownerOf(h, portHosts) != l.hostname {
					continue
				}
				if l.filtered {
					// Each virtual host of a listener with filters ends
					// with its filters' route (below); one whose
					// filters do not resolve has only that.
					k := servedRoute{rc, h, filterRoute(l)}
					want[k] = append(want[k], fmt.Sprintf("%s: its listener filters' route", l))
				}
				if l.filterRefused {
					continue
				}
				for r := range a.rules {
					if slices.Contains(a.dropped, r) {
						continue
					}
					k := servedRoute{rc, h, fmt.Sprintf("%s.%s.%d", a.namespace, a.name, r)}
					want[k] = append(want[k], fmt.Sprintf("%s %s/%s rule %d through %s", a.kind, a.namespace, a.name, r, l))
				}
			}
		}
	}
	// A listener with filters ends its virtual host with the 404 catch-all;
	// one whose filters do not resolve has the 500 route only.
	for _, l := range claims {
		rc, ok := rcOf[l]
		if !ok || !l.filtered {
			continue
		}
		k := servedRoute{rc, hostOrStar(l.hostname), filterRoute(l)}
		want[k] = append(want[k], fmt.Sprintf("%s: its listener filters' route", l))
	}
	got := map[servedRoute]bool{}
	for _, rc := range routes {
		for _, vh := range rc.GetVirtualHosts() {
			if strings.HasPrefix(vh.GetName(), "misdirected:") {
				continue // 421 for the port's other HTTPS listeners
			}
			for _, d := range vh.GetDomains() {
				for _, r := range vh.GetRoutes() {
					got[servedRoute{rc.GetName(), d, r.GetName()}] = true
				}
			}
		}
	}
	for k, why := range want {
		if !got[k] {
			t.Errorf("Gateway %s: status -f reports %s; discovery -f does not serve Envoy route %s under %s in route configuration %s",
				gw, strings.Join(why, ", "), k.name, k.host, k.rc)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("Gateway %s: discovery -f serves Envoy route %s under %s in route configuration %s, which no route status -f reports accepted there explains",
				gw, k.name, k.host, k.rc)
		}
	}
	return len(want)
}

func describeClaims(claims []listenerClaim, port uint32) string {
	var parts []string
	for _, l := range claims {
		if l.port == port {
			parts = append(parts, fmt.Sprintf("%s served=%v", l, l.served))
		}
	}
	if len(parts) == 0 {
		return "none on that port"
	}
	return strings.Join(parts, "; ")
}

// chainRDS is the route configuration an HTTP connection manager of fc
// fetches over RDS.
func chainRDS(fc *listenerv3.FilterChain) string {
	for _, f := range fc.GetFilters() {
		hcm := &hcmv3.HttpConnectionManager{}
		if f.GetTypedConfig().MessageIs(hcm) && f.GetTypedConfig().UnmarshalTo(hcm) == nil {
			return hcm.GetRds().GetRouteConfigName()
		}
	}
	return ""
}

func hostnameList(h string) []string {
	if h == "" {
		return nil
	}
	return []string{h}
}

// covers reports whether wildcard hostname w ("*.example.com") matches h,
// a hostname or a narrower wildcard, other than w itself.
func covers(w, h string) bool {
	return strings.HasPrefix(w, "*.") && len(h) > len(w)-1 && strings.HasSuffix(h, w[1:])
}

// intersectHostnames are the hostnames a route with hostnames routes gets
// on a listener with hostname listener (Gateway API: the intersection;
// the listener's, or "*" for any, when the route names none).
func intersectHostnames(listener string, hostnames []string) []string {
	if len(hostnames) == 0 {
		if listener == "" {
			return []string{"*"}
		}
		return []string{listener}
	}
	var out []string
	for _, h := range hostnames {
		var got string
		switch {
		case listener == "" || h == listener || covers(listener, h):
			got = h
		case covers(h, listener):
			got = listener
		default:
			continue
		}
		if !slices.Contains(out, got) {
			out = append(out, got)
		}
	}
	return out
}

// ownerOf is the hostname of the listeners, among hosts (a port's), that
// take requests for h (GEP-2465): h's own listener, else the most specific
// wildcard covering h, else the listener without hostname ("").
func ownerOf(h string, hosts []string) string {
	best := ""
	for _, lh := range hosts {
		switch {
		case lh == h:
			return h
		case covers(lh, h) && len(lh) > len(best):
			best = lh
		}
	}
	return best
}

// streamPort reports whether status says port is served by TLS or TCP
// listeners (a TCP proxy per filter chain, no route configuration).
func streamPort(claims []listenerClaim, port uint32) bool {
	return slices.ContainsFunc(claims, func(l listenerClaim) bool {
		return l.served && l.port == port && (l.protocol == gwv1.TLSProtocolType || l.protocol == gwv1.TCPProtocolType)
	})
}

// compareStreams checks the TLS and TCP ports served against status, both
// ways, by server name: each hostname an accepted TLSRoute gets on a
// served TLS listener (the intersection with the listener's hostname, less
// what a more specific listener of the port owns) is served by exactly one
// filter chain of that port, one of a route status reports there (routes
// competing for a name: one wins, which one is the translator's rule,
// StreamPortClaims); a served TCP listener with an accepted TCPRoute
// serves one chain without server names; no chain serves a name no such
// route explains. A chain terminates TLS exactly when its listener is in
// mode Terminate (passthrough never terminates). Chains are named
// "<listener>|<kind>/<namespace>/<name>". It returns the number of server
// names (per port) status says are served.
func compareStreams(t *testing.T, gw string, claims []listenerClaim, attachments []routeAttachment, served proxyResources) int {
	t.Helper()
	type key struct {
		port uint32
		name string // "*": no server names
	}
	want := map[key][]string{}      // chain names that may serve it
	terminates := map[string]bool{} // by listener name (of a stream port)
	for _, a := range attachments {
		for _, ln := range a.listeners {
			i := slices.IndexFunc(claims, func(l listenerClaim) bool { return l.parent == a.parent && l.name == ln })
			if i < 0 || !claims[i].served || !streamPort(claims, claims[i].port) {
				continue
			}
			l := claims[i]
			terminates[l.name] = l.terminate
			chain := l.name + "|" + a.kind + "/" + a.namespace + "/" + a.name
			if l.protocol == gwv1.TCPProtocolType {
				k := key{l.port, "*"}
				want[k] = append(want[k], chain)
				continue
			}
			var portHosts []string
			for _, o := range claims {
				if o.served && o.port == l.port {
					portHosts = append(portHosts, o.hostname)
				}
			}
			for _, h := range intersectHostnames(l.hostname, a.hostnames) {
				if h != "*" && ownerOf(h, portHosts) != l.hostname {
					continue
				}
				k := key{l.port, h}
				want[k] = append(want[k], chain)
			}
		}
	}
	got := map[key][]string{}
	for _, sl := range served.Listeners {
		port := sl.GetAddress().GetSocketAddress().GetPortValue()
		if !streamPort(claims, port) {
			continue
		}
		for _, fc := range sl.GetFilterChains() {
			names := fc.GetFilterChainMatch().GetServerNames()
			if len(names) == 0 {
				names = []string{"*"}
			}
			for _, n := range names {
				got[key{port, n}] = append(got[key{port, n}], fc.GetName())
			}
			listener, _, _ := strings.Cut(fc.GetName(), "|")
			if term, ok := terminates[listener]; ok && term != (fc.GetTransportSocket() != nil) {
				t.Errorf("Gateway %s: port %d chain %s: terminates TLS = %v, but its listener's mode says %v",
					gw, port, fc.GetName(), fc.GetTransportSocket() != nil, term)
			}
		}
	}
	for k, chains := range want {
		g := got[k]
		if len(g) != 1 || !slices.Contains(chains, g[0]) {
			t.Errorf("Gateway %s: port %d name %s: status -f reports it through %q; discovery -f serves it by chains %q",
				gw, k.port, k.name, chains, g)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("Gateway %s: port %d: discovery -f serves name %s by chains %q, which no route status -f reports accepted there explains",
				gw, k.port, k.name, g)
		}
	}
	return len(want)
}
