// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// GatewayStatus computes the status of our Gateway gw (Gateway API
// GatewayStatus; addresses are left to the caller): the Gateway's Accepted
// and Programmed conditions and one status.listeners entry per listener with
// its supportedKinds, attachedRoutes (attached[listener], from
// AttachedRoutes) and Accepted, ResolvedRefs, Conflicted and Programmed
// conditions.
//
// Accepted: True/Accepted when every listener is accepted; True/
// ListenersNotValid when some are not; False/ListenersNotValid when none is
// (or there are none). Programmed: True/Programmed when programmed (the
// gateway's deployment is ready), else False/Pending; a listener is
// Programmed only when it is accepted, not conflicted and the Gateway is
// programmed (False/Invalid for a listener that is not accepted, is
// conflicted, or is HTTPS without a certificate that resolves: Served).
// InsecureFrontendValidationMode=True/ConfigurationChanged while the
// Gateway's spec.tls.frontend uses AllowInsecureFallback. With
// spec.tls.backend.clientCertificateRef set, the Gateway's ResolvedRefs:
// True, or False with InvalidClientCertificateRef or RefNotPermitted.
// A listener whose certificateRef does not resolve stays Accepted (routes
// attach and count) with ResolvedRefs=False. A conflicted listener keeps its Accepted condition. Conditions carry the
// Gateway's generation and lastTransitionTime now (the writer keeps the live
// time of an unchanged condition).
func GatewayStatus(gw *GatewayView, attached map[gwv1.SectionName]int32, programmed bool, now metav1.Time) gwv1.GatewayStatus {
	cond := func(typ string, ok bool, reason, msg string) metav1.Condition {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: gw.Generation, LastTransitionTime: now}
	}
	var st gwv1.GatewayStatus
	valid := 0
	for _, l := range gw.Listeners {
		ls := gwv1.ListenerStatus{Name: l.Name, SupportedKinds: l.Kinds, AttachedRoutes: attached[l.Name]}
		if ls.SupportedKinds == nil {
			ls.SupportedKinds = []gwv1.RouteGroupKind{}
		}
		if l.Accepted {
			valid++
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "listener accepted"))
		} else {
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionAccepted), false, string(l.Reason), l.Message))
		}
		if l.ResolvedRefs {
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionResolvedRefs), true, string(gwv1.ListenerReasonResolvedRefs), "references resolved"))
		} else {
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionResolvedRefs), false, string(l.RefsReason), l.RefsMessage))
		}
		if l.Conflicted {
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionConflicted), true, string(l.ConflictReason), l.ConflictMessage))
		} else {
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionConflicted), false, string(gwv1.ListenerReasonNoConflicts), "no conflicts"))
		}
		switch {
		case !l.Accepted:
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), "listener is not accepted"))
		case l.Conflicted:
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), "listener is conflicted"))
		case !l.Served():
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid),
				"listener has no usable certificate (see ResolvedRefs); it is not served"))
		case !programmed:
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonPending), "the gateway deployment is not ready"))
		default:
			ls.Conditions = append(ls.Conditions, cond(string(gwv1.ListenerConditionProgrammed), true, string(gwv1.ListenerReasonProgrammed), "listener programmed"))
		}
		st.Listeners = append(st.Listeners, ls)
	}
	switch n := len(gw.Listeners); {
	case n > 0 && valid == n:
		st.Conditions = append(st.Conditions, cond(string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonAccepted), "Gateway accepted"))
	case valid > 0:
		st.Conditions = append(st.Conditions, cond(string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonListenersNotValid),
			fmt.Sprintf("%d of %d listeners are not valid", n-valid, n)))
	default:
		st.Conditions = append(st.Conditions, cond(string(gwv1.GatewayConditionAccepted), false, string(gwv1.GatewayReasonListenersNotValid), "no valid listener"))
	}
	if gw.BackendClientCertSet {
		if gw.BackendClientCert.Name != "" {
			st.Conditions = append(st.Conditions, cond(string(gwv1.GatewayConditionResolvedRefs), true,
				string(gwv1.GatewayReasonResolvedRefs), "references resolved"))
		} else {
			st.Conditions = append(st.Conditions, cond(string(gwv1.GatewayConditionResolvedRefs), false,
				string(gw.BackendClientCertReason), gw.BackendClientCertMessage+"; backends are reached without a client certificate"))
		}
	}
	if gw.InsecureFrontend {
		// Present only while the mode is in use: the condition goes when
		// the Gateway returns to AllowValidOnly (the writer applies the
		// whole set of our conditions).
		st.Conditions = append(st.Conditions, cond(string(gwv1.GatewayConditionInsecureFrontendValidationMode), true,
			string(gwv1.GatewayReasonConfigurationChanged),
			"spec.tls.frontend uses mode AllowInsecureFallback: clients without a valid certificate are accepted"))
	}
	if programmed {
		st.Conditions = append(st.Conditions, cond(string(gwv1.GatewayConditionProgrammed), true, string(gwv1.GatewayReasonProgrammed), "the gateway deployment is ready"))
	} else {
		st.Conditions = append(st.Conditions, cond(string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonPending), "the gateway deployment is not ready"))
	}
	return st
}

// ProgrammedStatus is what a Gateway's deployment says about it: the
// Gateway's Programmed condition (Programmed, Reason, Message), whether its
// listeners are served (the Gateway has its Service), and
// status.addresses.
type ProgrammedStatus struct {
	Programmed      bool
	Reason          gwv1.GatewayConditionReason
	Message         string
	ListenersServed bool
	Addresses       []gwv1.GatewayStatusAddress
}

// WithProgrammed returns st (from GatewayStatus with programmed false) with
// p applied: status.addresses, the Gateway's Programmed condition, and
// Programmed=True/Programmed on each listener that is served
// (ListenerView.Served) when p.ListenersServed (as Istio, a listener is programmed once
// its Gateway has a Service, whether or not an address is assigned). Other
// listeners keep their condition. st is not modified.
func WithProgrammed(st gwv1.GatewayStatus, gw *GatewayView, p ProgrammedStatus) gwv1.GatewayStatus {
	out := *st.DeepCopy()
	out.Addresses = p.Addresses
	status := metav1.ConditionFalse
	if p.Programmed {
		status = metav1.ConditionTrue
	}
	for i := range out.Conditions {
		if c := &out.Conditions[i]; c.Type == string(gwv1.GatewayConditionProgrammed) {
			c.Status, c.Reason, c.Message = status, string(p.Reason), p.Message
		}
	}
	if !p.ListenersServed {
		return out
	}
	for i := range out.Listeners {
		ls := &out.Listeners[i]
		var lv *ListenerView
		for j := range gw.Listeners {
			if gw.Listeners[j].Name == ls.Name {
				lv = &gw.Listeners[j]
			}
		}
		if lv == nil || !lv.Served() {
			continue
		}
		for j := range ls.Conditions {
			if c := &ls.Conditions[j]; c.Type == string(gwv1.ListenerConditionProgrammed) {
				c.Status, c.Reason, c.Message = metav1.ConditionTrue, string(gwv1.ListenerReasonProgrammed), "listener programmed"
			}
		}
	}
	return out
}
