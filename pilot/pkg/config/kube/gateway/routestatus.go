// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// routeStatuses derives our status.parents entries of each route of kind
// in routes.
func routeStatuses(routes krt.Collection[RouteResult], kind, controller string, opts []krt.CollectionOption) krt.Collection[RouteStatus] {
	return krt.NewCollection(routes, func(ctx krt.HandlerContext, r RouteResult) *RouteStatus {
		if r.Route.Kind != kind {
			return nil
		}
		return &RouteStatus{Namespace: r.Route.Namespace, Name: r.Route.Name, Parents: RouteParentStatuses(r, controller)}
	}, opts...)
}

// RouteParentStatuses returns our entries of the route's status.parents
// (Gateway API RouteParentStatus), one per parentRef naming a Gateway of
// ours, in parentRef order: parentRef as written, controllerName, and the
// Accepted condition of the attachment and the route's ResolvedRefs
// condition (RouteResolvedRefs over every rule's backends, then, per
// parent, the TLS its Gateway cannot have: tlsProblemIn), both with the
// route's generation; on an accepted parent of a route with some rules
// left out (and some served), PartiallyInvalid=True/UnsupportedValue with
// DroppedRulesMessage. A route with no rule served is not accepted at all
// (checkRules), so it never gets PartiallyInvalid, as the Gateway API
// requires. lastTransitionTime is left zero for the writer.
func RouteParentStatuses(r RouteResult, controller string) []gwv1.RouteParentStatus {
	var all []ResolvedBackend
	for _, rule := range r.Rules {
		all = append(all, rule.Backends...)
		all = append(all, rule.MirrorErrors...)
		all = append(all, rule.AuthErrors...)
	}
	refsOK, refsReason, refsMsg := RouteResolvedRefs(all)
	cond := func(typ string, ok bool, reason, msg string) metav1.Condition {
		st := metav1.ConditionFalse
		if ok {
			st = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: r.Generation}
	}
	dropped := DroppedRulesMessage(r.Rules)
	out := make([]gwv1.RouteParentStatus, 0, len(r.Parents))
	for _, p := range r.Parents {
		ok, reason, msg := refsOK, refsReason, refsMsg
		if ok {
			// A DestinationRule credentialName CA is read in the Gateway's
			// namespace: one parent may have it and another not.
			if problem := tlsProblemIn(r, p.Gateway.Namespace); problem != "" {
				ok, reason, msg = false, RouteReasonInvalidBackendTLS, problem
			}
		}
		conds := []metav1.Condition{
			cond(string(gwv1.RouteConditionAccepted), p.Accepted, string(p.Reason), p.Message),
			cond(string(gwv1.RouteConditionResolvedRefs), ok, string(reason), msg),
		}
		if p.Accepted && dropped != "" {
			conds = append(conds, cond(string(gwv1.RouteConditionPartiallyInvalid), true, string(gwv1.RouteReasonUnsupportedValue), dropped))
		}
		if p.Accepted && len(p.Taken) > 0 {
			conds = append(conds, cond(RouteConflictedCondition, true, string(gwv1.ListenerReasonHostnameConflict), takenMessage(p.Gateway, p.Taken)))
		}
		out = append(out, gwv1.RouteParentStatus{
			ParentRef:      p.ParentRef,
			ControllerName: gwv1.GatewayController(controller),
			Conditions:     conds,
		})
	}
	return out
}
