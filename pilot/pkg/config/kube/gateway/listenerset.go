// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ListenerSetKind is the Gateway API ListenerSet kind (group GatewayGroup):
// more listeners for a Gateway, kept in another object, possibly in another
// namespace (GEP-1713).
const ListenerSetKind = "ListenerSet"

// ListenerSetView is one ListenerSet whose parentRef names a Gateway of
// ours, as that Gateway's view validated it (GatewayView.ListenerSets).
type ListenerSetView struct {
	ListenerSet types.NamespacedName
	Generation  int64
	Created     time.Time
	// Allowed is false, with Reason (NotAllowed, ParentNotAccepted) and
	// Message, when the Gateway's spec.allowedListeners does not admit the
	// ListenerSet's namespace or the Gateway itself is not accepted; such a
	// ListenerSet's listeners are not validated (Listeners is empty).
	Allowed bool
	Reason  gwv1.ListenerSetConditionReason
	Message string
	// Listeners are spec.listeners validated as a Gateway's are, Namespace
	// the ListenerSet's and Set its key; Conflicted is decided against the
	// listeners of higher precedence (ListenerPrecedence).
	Listeners []ListenerView
}

// valid reports whether l counts as a valid listener of its ListenerSet:
// accepted, not conflicted and its references resolved.
func (l *ListenerView) valid() bool { return l.Usable() && l.ResolvedRefs }

// validListeners counts the valid listeners.
func (s *ListenerSetView) validListeners() int {
	n := 0
	for i := range s.Listeners {
		if s.Listeners[i].valid() {
			n++
		}
	}
	return n
}

// Accepted reports whether the ListenerSet is attached to its Gateway
// (its Accepted=True): allowed, with at least one valid listener. Only an
// accepted ListenerSet's listeners are served, count in the Gateway's
// attachedListenerSets and take routes.
func (s *ListenerSetView) Accepted() bool { return s.Allowed && s.validListeners() > 0 }

// ListenerSet returns the view of the ListenerSet key among those naming g,
// or nil.
func (g *GatewayView) ListenerSet(key types.NamespacedName) *ListenerSetView {
	for i := range g.ListenerSets {
		if g.ListenerSets[i].ListenerSet == key {
			return &g.ListenerSets[i]
		}
	}
	return nil
}

// AttachedListenerSets counts the accepted ListenerSets of g (Gateway
// status.attachedListenerSets).
func (g *GatewayView) AttachedListenerSets() int32 {
	var n int32
	for i := range g.ListenerSets {
		if g.ListenerSets[i].Accepted() {
			n++
		}
	}
	return n
}

// ListenerSetParent returns the Gateway that ls's spec.parentRef names (its
// namespace defaults to the ListenerSet's); ok is false when the parentRef
// names another group or kind.
func ListenerSetParent(ls *gwv1.ListenerSet) (types.NamespacedName, bool) {
	ref := ls.Spec.ParentRef
	if string(ptr.Deref(ref.Group, GatewayGroup)) != GatewayGroup || string(ptr.Deref(ref.Kind, GatewayKind)) != GatewayKind {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: string(ptr.Deref(ref.Namespace, gwv1.Namespace(ls.Namespace))), Name: string(ref.Name)}, true
}

// AllowsListenerSets reports whether gw's spec.allowedListeners admits a
// ListenerSet in namespace ns, and why not: with no allowedListeners (or
// from None) none is admitted; Same admits the Gateway's namespace, All
// every namespace, Selector those whose labels (nsLabels) the selector
// matches.
func AllowsListenerSets(gw *gwv1.Gateway, ns string, nsLabels NamespaceLabels) (bool, string) {
	al := gw.Spec.AllowedListeners
	if al == nil || al.Namespaces == nil {
		return false, fmt.Sprintf("Gateway %s/%s has no spec.allowedListeners: it admits no ListenerSet", gw.Namespace, gw.Name)
	}
	switch from := ptr.Deref(al.Namespaces.From, gwv1.NamespacesFromNone); from {
	case gwv1.NamespacesFromAll:
		return true, ""
	case gwv1.NamespacesFromSame:
		if ns == gw.Namespace {
			return true, ""
		}
		return false, fmt.Sprintf("Gateway %s/%s admits ListenerSets of its own namespace only (allowedListeners from Same)", gw.Namespace, gw.Name)
	case gwv1.NamespacesFromSelector:
		if al.Namespaces.Selector == nil {
			return false, fmt.Sprintf("Gateway %s/%s: allowedListeners from Selector without a selector admits nothing", gw.Namespace, gw.Name)
		}
		sel, err := metav1.LabelSelectorAsSelector(al.Namespaces.Selector)
		if err != nil {
			return false, fmt.Sprintf("Gateway %s/%s: allowedListeners selector: %v", gw.Namespace, gw.Name, err)
		}
		var lbls map[string]string
		if nsLabels != nil {
			lbls = nsLabels(ns)
		}
		if lbls != nil && sel.Matches(labels.Set(lbls)) {
			return true, ""
		}
		return false, fmt.Sprintf("namespace %s does not match the allowedListeners selector of Gateway %s/%s", ns, gw.Namespace, gw.Name)
	case gwv1.NamespacesFromNone:
		return false, fmt.Sprintf("Gateway %s/%s admits no ListenerSet (allowedListeners from None)", gw.Namespace, gw.Name)
	default:
		return false, fmt.Sprintf("Gateway %s/%s: allowedListeners from %q is not supported", gw.Namespace, gw.Name, from)
	}
}

// ListenerPrecedence orders ListenerSets as the Gateway API's listener
// precedence does: the oldest first (creationTimestamp), then by
// namespace/name. The Gateway's own listeners come before all of them.
func ListenerPrecedence(a, b *gwv1.ListenerSet) int {
	if c := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
}

// AddListenerSets validates sets, the ListenerSets whose parentRef names
// gw, into v.ListenerSets, in ListenerPrecedence order. A ListenerSet the
// Gateway does not admit (AllowsListenerSets), or any while the Gateway is
// not accepted for a reason of its own (class or Gateway parameters,
// addresses; set v's problems first), is not Allowed. An admitted one's
// listeners are validated in its namespace (certificateRefs need a
// ReferenceGrant from ListenerSets there) and checked for conflicts, in
// order, against the listeners of higher precedence: the Gateway's own
// that are not conflicted among themselves, then those of earlier accepted
// ListenerSets and earlier ones of the same ListenerSet. The listener of
// lower precedence is the conflicted one: ProtocolConflict for the same
// port with another protocol, HostnameConflict for the same port, protocol
// and hostname.
func (v *GatewayView) AddListenerSets(gw *gwv1.Gateway, sets []*gwv1.ListenerSet, certs CertificateLookups, nsLabels NamespaceLabels) {
	sets = slices.Clone(sets)
	slices.SortFunc(sets, ListenerPrecedence)
	var winners []ListenerView
	for _, l := range v.Listeners {
		if !l.Conflicted {
			winners = append(winners, l)
		}
	}
	certs.FromKind = ListenerSetKind
	parentProblem := cmp.Or(v.ClassProblem, v.ParametersProblem, v.AddressProblem)
	for _, ls := range sets {
		sv := ListenerSetView{ListenerSet: types.NamespacedName{Namespace: ls.Namespace, Name: ls.Name},
			Generation: ls.Generation, Created: ls.CreationTimestamp.Time, Allowed: true}
		if parentProblem != "" {
			sv.Allowed, sv.Reason = false, gwv1.ListenerSetReasonParentNotAccepted
			sv.Message = fmt.Sprintf("Gateway %s is not accepted: %s", v.Gateway, parentProblem)
		} else if ok, msg := AllowsListenerSets(gw, ls.Namespace, nsLabels); !ok {
			sv.Allowed, sv.Reason, sv.Message = false, gwv1.ListenerSetReasonNotAllowed, msg
		}
		if !sv.Allowed {
			v.ListenerSets = append(v.ListenerSets, sv)
			continue
		}
		var local []ListenerView
		for _, e := range ls.Spec.Listeners {
			// A ListenerEntry has a Listener's fields, in its order.
			l := newListenerView(gw, ls.Namespace, gwv1.Listener(e), certs)
			l.Set = sv.ListenerSet
			if w := conflictWith(&l, winners, local); w != nil {
				l.Conflicted = true
				if w.Protocol != l.Protocol {
					l.ConflictReason = gwv1.ListenerReasonProtocolConflict
					l.ConflictMessage = fmt.Sprintf("%s uses port %d with protocol %s", listenerOwner(w, v.Gateway), w.Port, w.Protocol)
				} else {
					l.ConflictReason = gwv1.ListenerReasonHostnameConflict
					l.ConflictMessage = fmt.Sprintf("%s uses port %d with the same hostname %q", listenerOwner(w, v.Gateway), w.Port, w.Hostname)
				}
			} else {
				local = append(local, l)
			}
			sv.Listeners = append(sv.Listeners, l)
		}
		if sv.Accepted() {
			winners = append(winners, local...)
		}
		v.ListenerSets = append(v.ListenerSets, sv)
	}
}

// conflictWith returns the first listener of higher precedence (in
// winners, then local) that l conflicts with, or nil; a protocol conflict
// is preferred to a hostname conflict.
func conflictWith(l *ListenerView, winners, local []ListenerView) *ListenerView {
	var hostname *ListenerView
	for _, group := range [][]ListenerView{winners, local} {
		for i := range group {
			w := &group[i]
			if w.Port != l.Port {
				continue
			}
			if w.Protocol != l.Protocol {
				return w
			}
			if w.Hostname == l.Hostname && hostname == nil {
				hostname = w
			}
		}
	}
	return hostname
}

// listenerOwner names w for messages: "listener x of Gateway ns/gw" or
// "listener x of ListenerSet ns/ls".
func listenerOwner(w *ListenerView, gw types.NamespacedName) string {
	if w.Set.Name != "" {
		return fmt.Sprintf("listener %s of ListenerSet %s", w.Name, w.Set)
	}
	return fmt.Sprintf("listener %s of Gateway %s", w.Name, gw)
}

// ListenerSetStatus computes the status of ls, a ListenerSet of gw (Gateway
// API ListenerSetStatus), with attached (from ListenerSetAttachedRoutes)
// giving each listener's attachedRoutes:
//
//   - not Allowed: Accepted=False and Programmed=False, both with the
//     reason (NotAllowed, ParentNotAccepted); no listener entries;
//   - no valid listener (accepted, unconflicted, references resolved):
//     Accepted=False/ListenersNotValid, Programmed=False/ListenersNotValid;
//   - else Accepted=True (Accepted, or ListenersNotValid when some are not
//     valid) and Programmed=False/Pending until WithListenerSetProgrammed.
//
// Each listener entry has its supportedKinds, attachedRoutes and the
// Accepted, ResolvedRefs, Conflicted and Programmed conditions of a
// Gateway's listener, except that a conflicted listener of a ListenerSet is
// Accepted=False and Programmed=False with its conflict reason
// (ProtocolConflict, HostnameConflict), as the Gateway API asks of the
// listener that loses; a listener that would be served is
// Programmed=False/Pending until WithListenerSetProgrammed. Conditions
// carry the ListenerSet's generation; lastTransitionTime is left zero for
// the writer.
func ListenerSetStatus(ls *ListenerSetView, attached map[gwv1.SectionName]int32) gwv1.ListenerSetStatus {
	cond := func(typ string, ok bool, reason, msg string) metav1.Condition {
		st := metav1.ConditionFalse
		if ok {
			st = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: ls.Generation}
	}
	accepted, programmed := string(gwv1.ListenerSetConditionAccepted), string(gwv1.ListenerSetConditionProgrammed)
	var st gwv1.ListenerSetStatus
	if !ls.Allowed {
		st.Conditions = []metav1.Condition{
			cond(accepted, false, string(ls.Reason), ls.Message),
			cond(programmed, false, string(ls.Reason), ls.Message),
		}
		return st
	}
	for _, l := range ls.Listeners {
		e := gwv1.ListenerEntryStatus{Name: l.Name, SupportedKinds: l.Kinds, AttachedRoutes: attached[l.Name]}
		if e.SupportedKinds == nil {
			e.SupportedKinds = []gwv1.RouteGroupKind{}
		}
		switch {
		case l.Conflicted:
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionAccepted), false, string(l.ConflictReason), l.ConflictMessage))
		case !l.Accepted:
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionAccepted), false, string(l.Reason), l.Message))
		default:
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "listener accepted"))
		}
		if l.ResolvedRefs {
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionResolvedRefs), true, string(gwv1.ListenerReasonResolvedRefs), "references resolved"))
		} else {
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionResolvedRefs), false, string(l.RefsReason), l.RefsMessage))
		}
		if l.Conflicted {
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionConflicted), true, string(l.ConflictReason), l.ConflictMessage))
		} else {
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionConflicted), false, string(gwv1.ListenerReasonNoConflicts), "no conflicts"))
		}
		switch {
		case l.Conflicted:
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionProgrammed), false, string(l.ConflictReason), l.ConflictMessage))
		case !l.Accepted:
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), "listener is not accepted"))
		case !l.Served():
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid),
				"listener has no usable certificate (see ResolvedRefs); it is not served"))
		default:
			e.Conditions = append(e.Conditions, cond(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonPending), "the gateway deployment is not ready"))
		}
		st.Listeners = append(st.Listeners, e)
	}
	switch valid, n := ls.validListeners(), len(ls.Listeners); {
	case valid == 0:
		msg := "no valid listener"
		st.Conditions = []metav1.Condition{
			cond(accepted, false, string(gwv1.ListenerSetReasonListenersNotValid), msg),
			cond(programmed, false, string(gwv1.ListenerSetReasonListenersNotValid), msg),
		}
	case valid == n:
		st.Conditions = []metav1.Condition{
			cond(accepted, true, string(gwv1.ListenerSetReasonAccepted), "ListenerSet accepted"),
			cond(programmed, false, string(gwv1.ListenerSetReasonPending), "the gateway deployment is not ready"),
		}
	default:
		st.Conditions = []metav1.Condition{
			cond(accepted, true, string(gwv1.ListenerSetReasonListenersNotValid), fmt.Sprintf("%d of %d listeners are not valid", n-valid, n)),
			cond(programmed, false, string(gwv1.ListenerSetReasonPending), "the gateway deployment is not ready"),
		}
	}
	return st
}

// WithListenerSetProgrammed returns st (from ListenerSetStatus) once its
// Gateway is programmed (its Programmed=True): every Programmed condition
// still Pending, the ListenerSet's and its served listeners', becomes
// True/Programmed. st is not modified.
func WithListenerSetProgrammed(st gwv1.ListenerSetStatus, gatewayProgrammed bool) gwv1.ListenerSetStatus {
	out := *st.DeepCopy()
	if !gatewayProgrammed {
		return out
	}
	flip := func(conds []metav1.Condition, msg string) {
		for i := range conds {
			if c := &conds[i]; c.Type == string(gwv1.ListenerSetConditionProgrammed) && c.Reason == string(gwv1.ListenerSetReasonPending) {
				c.Status, c.Reason, c.Message = metav1.ConditionTrue, string(gwv1.ListenerSetReasonProgrammed), msg
			}
		}
	}
	flip(out.Conditions, "the gateway deployment is ready")
	for i := range out.Listeners {
		flip(out.Listeners[i].Conditions, "listener programmed")
	}
	return out
}

// ListenerSetAttachedRoutes counts, per ListenerSet and listener, the routes
// attached to it through a parentRef naming the ListenerSet
// (status.listeners[].attachedRoutes of a ListenerSet); results[i] are
// route i's results, as for AttachedRoutes.
func ListenerSetAttachedRoutes(results [][]ParentResult) map[types.NamespacedName]map[gwv1.SectionName]int32 {
	out := map[types.NamespacedName]map[gwv1.SectionName]int32{}
	for _, route := range results {
		seen := map[types.NamespacedName][]gwv1.SectionName{}
		for _, r := range route {
			if !r.Accepted || r.ListenerSet.Name == "" {
				continue
			}
			for _, l := range r.Listeners {
				if slices.Contains(seen[r.ListenerSet], l) {
					continue
				}
				seen[r.ListenerSet] = append(seen[r.ListenerSet], l)
				if out[r.ListenerSet] == nil {
					out[r.ListenerSet] = map[gwv1.SectionName]int32{}
				}
				out[r.ListenerSet][l]++
			}
		}
	}
	return out
}

// ListenerSetListenerName is the translator's name (model.Listener.Name) of
// listener name of ListenerSet set: "<namespace>/<listenerset>/<name>",
// which no Gateway listener name (a DNS subdomain) can equal.
func ListenerSetListenerName(set types.NamespacedName, name gwv1.SectionName) string {
	return set.Namespace + "/" + set.Name + "/" + string(name)
}
