// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Route is what attachment needs of an HTTPRoute or GRPCRoute.
type Route struct {
	// Kind is HTTPRouteKind or GRPCRouteKind.
	Kind      string
	Namespace string
	Name      string
	// Hostnames is spec.hostnames; empty means any.
	Hostnames []gwv1.Hostname
	// ParentRefs is spec.parentRefs.
	ParentRefs []gwv1.ParentReference
}

// GatewayLookup returns our view of the Gateway key, or nil when it is
// missing or not of one of our classes.
type GatewayLookup func(key types.NamespacedName) *GatewayView

// ListenerSetLookup returns the Gateway that the ListenerSet key names as
// its parent; ok is false when the ListenerSet is missing or names no
// Gateway.
type ListenerSetLookup func(key types.NamespacedName) (gateway types.NamespacedName, ok bool)

// ParentResult is the attachment of one route to one parentRef that names a
// Gateway of ours, or a ListenerSet of one: the route's status.parents[]
// entry for it.
type ParentResult struct {
	// ParentRef is the parentRef as written in the route.
	ParentRef gwv1.ParentReference
	// Gateway is the parentRef resolved: namespace defaulted to the route's;
	// for a parentRef naming a ListenerSet, the ListenerSet's Gateway.
	Gateway types.NamespacedName
	// ListenerSet is, for a parentRef naming a ListenerSet, that
	// ListenerSet (namespace defaulted to the route's); zero otherwise.
	// Listeners are then the ListenerSet's.
	ListenerSet types.NamespacedName
	// Accepted with Reason (RouteReasonAccepted, NotAllowedByListeners,
	// NoMatchingListenerHostname, NoMatchingParent) and Message.
	Accepted bool
	Reason   gwv1.RouteConditionReason
	Message  string
	// Listeners are the listeners the route attached to (when Accepted),
	// in the Gateway's listener order; each counts it in attachedRoutes.
	Listeners []gwv1.SectionName
	// Taken are the hostnames the route claims through Listeners that a
	// more specific listener of another namespace serves instead
	// (markTakenHostnames); the entry's Conflicted=True/HostnameConflict.
	Taken []TakenHostname
}

// attachment stages, in the order a listener is checked; a parentRef that
// attaches nowhere reports the reason of the furthest stage any listener
// reached.
const (
	stageNone     = iota // no listener passed sectionName and port
	stageSelected        // passed sectionName and port, hostnames do not intersect
	stageHostname        // hostnames intersect, allowedRoutes rejects the route
)

// AttachRoute computes, in the Gateway API's rules, the attachment of route
// to each of its parentRefs that names a Gateway of ours, in parentRef order.
// A parentRef's group and kind default to gateway.networking.k8s.io/Gateway
// and its namespace to the route's; other groups and kinds, and Gateways that
// gateways does not return (another class's, or missing), get no entry.
//
// Per listener, in order: sectionName and port (when set) must equal the
// listener's name and port, the listener must be accepted, the listener
// hostname and route hostnames must intersect (HostnamesIntersect), and
// allowedRoutes must admit the route's namespace (nsLabels feeds Selector)
// and kind. The route is Accepted when at least one listener passes; else the
// reason is NotAllowedByListeners if some listener failed only allowedRoutes,
// NoMatchingListenerHostname if some failed at hostnames, else
// NoMatchingParent.
func AttachRoute(route Route, gateways GatewayLookup, nsLabels NamespaceLabels) []ParentResult {
	return AttachRouteWithListenerSets(route, gateways, nil, nsLabels)
}

// AttachRouteWithListenerSets is AttachRoute where a parentRef may also
// name a ListenerSet (group gateway.networking.k8s.io, kind ListenerSet,
// namespace defaulted to the route's) whose parent is a Gateway of ours
// (sets resolves it; nil resolves none). Such a parentRef is attached to the
// ListenerSet's listeners only, by the same rules, and a parentRef naming
// the Gateway to the Gateway's own listeners only; each resolves on its
// own. A ListenerSet the Gateway has not accepted takes no route
// (NoMatchingParent). Each accepted result says which hostnames the
// route claims there that a more specific listener of another namespace
// takes (ParentResult.Taken, markTakenHostnames).
func AttachRouteWithListenerSets(route Route, gateways GatewayLookup, sets ListenerSetLookup, nsLabels NamespaceLabels) []ParentResult {
	var out []ParentResult
	views := map[types.NamespacedName]*GatewayView{}
	for _, ref := range route.ParentRefs {
		if string(ptr.Deref(ref.Group, GatewayGroup)) != GatewayGroup {
			continue
		}
		key := types.NamespacedName{Namespace: string(ptr.Deref(ref.Namespace, gwv1.Namespace(route.Namespace))), Name: string(ref.Name)}
		switch string(ptr.Deref(ref.Kind, GatewayKind)) {
		case GatewayKind:
			gw := gateways(key)
			if gw == nil {
				continue
			}
			views[key] = gw
			res := ParentResult{ParentRef: ref, Gateway: key}
			out = append(out, attachToListeners(route, res, "Gateway "+key.String(), gw.Listeners, nsLabels))
		case ListenerSetKind:
			if sets == nil {
				continue
			}
			parent, ok := sets(key)
			if !ok {
				continue
			}
			gw := gateways(parent)
			if gw == nil {
				continue
			}
			views[parent] = gw
			ls := gw.ListenerSet(key)
			if ls == nil {
				continue
			}
			res := ParentResult{ParentRef: ref, Gateway: parent, ListenerSet: key}
			if !ls.Accepted() {
				res.Reason = gwv1.RouteReasonNoMatchingParent
				res.Message = fmt.Sprintf("ListenerSet %s is not accepted by Gateway %s (see its status)", key, parent)
				out = append(out, res)
				continue
			}
			out = append(out, attachToListeners(route, res, "ListenerSet "+key.String(), ls.Listeners, nsLabels))
		}
	}
	for key, gw := range views { // each marks its own Gateway's results only
		markTakenHostnames(route, key, gw, out)
	}
	return out
}

// attachToListeners attaches route through res.ParentRef to listeners, those
// of the parent that parent (e.g. "Gateway ns/name") describes in messages.
func attachToListeners(route Route, res ParentResult, parent string, listeners []ListenerView, nsLabels NamespaceLabels) ParentResult {
	ref := res.ParentRef
	hostnames := make([]string, len(route.Hostnames))
	for i, h := range route.Hostnames {
		hostnames[i] = string(h)
	}
	stage := stageNone
	for i := range listeners {
		l := &listeners[i]
		if ref.SectionName != nil && *ref.SectionName != l.Name {
			continue
		}
		if ref.Port != nil && *ref.Port != l.Port {
			continue
		}
		if !l.Usable() {
			continue
		}
		if !HostnamesIntersect(l.Hostname, hostnames) {
			stage = max(stage, stageSelected)
			continue
		}
		if !l.AllowsNamespace(route.Namespace, nsLabels) || !l.AllowsKind(route.Kind) {
			stage = max(stage, stageHostname)
			continue
		}
		res.Listeners = append(res.Listeners, l.Name)
	}
	if len(res.Listeners) > 0 {
		res.Accepted, res.Reason = true, gwv1.RouteReasonAccepted
		res.Message = fmt.Sprintf("attached to %s listener(s) %s", parent, joinSections(res.Listeners))
		return res
	}
	switch stage {
	case stageHostname:
		res.Reason = gwv1.RouteReasonNotAllowedByListeners
		res.Message = fmt.Sprintf("no listener of %s%s allows a %s in namespace %s", parent, refScope(ref), route.Kind, route.Namespace)
	case stageSelected:
		res.Reason = gwv1.RouteReasonNoMatchingListenerHostname
		res.Message = fmt.Sprintf("no listener of %s%s has a hostname matching %q", parent, refScope(ref), hostnames)
	default:
		res.Reason = gwv1.RouteReasonNoMatchingParent
		res.Message = fmt.Sprintf("%s has no accepted, unconflicted listener%s", parent, refScope(ref))
	}
	return res
}

// refScope describes the sectionName and port narrowing of ref for messages.
func refScope(ref gwv1.ParentReference) string {
	var parts []string
	if ref.SectionName != nil {
		parts = append(parts, fmt.Sprintf("sectionName %q", *ref.SectionName))
	}
	if ref.Port != nil {
		parts = append(parts, fmt.Sprintf("port %d", *ref.Port))
	}
	if len(parts) == 0 {
		return ""
	}
	return " matching " + strings.Join(parts, " and ")
}

func joinSections(s []gwv1.SectionName) string {
	names := make([]string, len(s))
	for i, n := range s {
		names[i] = string(n)
	}
	return strings.Join(names, ", ")
}

// RouteAttachment converts r, a result of route's attachment, to the
// RouteAttachment that PoolParentStatuses takes (the pool's gatewayParents).
func (r ParentResult) RouteAttachment(route Route) RouteAttachment {
	return RouteAttachment{
		Kind:     route.Kind,
		Route:    types.NamespacedName{Namespace: route.Namespace, Name: route.Name},
		Accepted: r.Accepted,
		Reason:   string(r.Reason),
		Message:  r.Message,
	}
}

// AttachedRoutes counts, per Gateway and listener, the routes attached to it
// (Gateway API status.listeners[].attachedRoutes): each accepted result
// naming the Gateway (not one of its ListenerSets: ListenerSetAttachedRoutes)
// counts once for every listener in its Listeners. A route attaching to the
// same listener through two parentRefs counts once, so results must be
// grouped per route: results[i] are route i's results.
func AttachedRoutes(results [][]ParentResult) map[types.NamespacedName]map[gwv1.SectionName]int32 {
	out := map[types.NamespacedName]map[gwv1.SectionName]int32{}
	type attachment struct {
		gw       types.NamespacedName
		listener gwv1.SectionName
	}
	// seen is one route's attachments so far; a slice reused across routes
	// (a route has a handful), not a map per route.
	var seen []attachment
	for _, route := range results {
		seen = seen[:0]
		for _, r := range route {
			if !r.Accepted || r.ListenerSet.Name != "" {
				continue
			}
			for _, l := range r.Listeners {
				a := attachment{r.Gateway, l}
				if slices.Contains(seen, a) {
					continue
				}
				seen = append(seen, a)
				counts := out[r.Gateway]
				if counts == nil {
					counts = map[gwv1.SectionName]int32{}
					out[r.Gateway] = counts
				}
				counts[l]++
			}
		}
	}
	return out
}
