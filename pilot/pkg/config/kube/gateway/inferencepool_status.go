// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/upstreamtls"
)

// GatewayGroup and GatewayKind are what every parentRef we write carries (GIE
// InferencePool status.parents[].parentRef). Istio wrote its own group here
// (a bug listed in gie-facts.md); the parent is a Gateway API Gateway.
const (
	GatewayGroup = "gateway.networking.k8s.io"
	GatewayKind  = "Gateway"
)

// PoolParent is one gatewayParent of a pool: a Gateway of ours that at least
// one route referencing the pool names as a parent, with the result of each
// such route's attachment to that Gateway.
type PoolParent struct {
	Gateway types.NamespacedName
	Routes  []RouteAttachment
}

// RouteAttachment is one route's attachment to one Gateway, as our route
// controller computed it (not read back from the route's status).
type RouteAttachment struct {
	// Kind is HTTPRoute or GRPCRoute.
	Kind     string
	Route    types.NamespacedName
	Accepted bool
	// Reason and Message of the route's Accepted=False condition.
	Reason, Message string
}

// PoolParentStatuses computes our status.parents entries of pool, one per
// parent, sorted by Gateway, with controllerName controller, observedGeneration
// the pool's generation and lastTransitionTime now (the writer keeps the live
// time of a condition whose status did not change). epp is the Service that
// spec.endpointPickerRef names, looked up in the pool's namespace, or nil if
// there is none, and eppTLS is the client TLS of its port
// (upstreamtls.Resolve for the parents' Gateway namespaces).
//
// Accepted (GIE InferencePoolConditionAccepted): False/EndpointPickerRefMissing
// when spec.endpointPickerRef is unset (infermesh routes a pool's requests only
// through its EPP); True/Accepted when a route referencing the pool is accepted
// by the Gateway; else False/HTTPRouteNotAccepted naming the first such route
// and its reason. ResolvedRefs (InferencePoolConditionResolvedRefs):
// False/InvalidExtensionRef for a group other than core, a kind other than
// Service, an empty name, a missing Service, an ExternalName Service, or a
// port the Service does not have; also False/InvalidExtensionRef (GIE:
// "the Extension is invalid in some way") when the EPP's client TLS
// cannot be honoured for that parent's Gateway (eppTLS.ProblemIn: an
// invalid BackendTLSPolicy, a DestinationRule whose CA cannot be had):
// requests through the pool are then answered 500, FailOpen or not; else
// True/ResolvedRefs.
func PoolParentStatuses(pool *inferencev1.InferencePool, parents []PoolParent, epp *corev1.Service, eppTLS upstreamtls.Result,
	controller string, now metav1.Time,
) []inferencev1.ParentStatus {
	resolved := resolvedRefsCondition(pool, epp)
	out := make([]inferencev1.ParentStatus, 0, len(parents))
	for _, p := range parents {
		accepted := acceptedCondition(pool, p)
		refs := resolved
		if problem := eppTLS.ProblemIn(p.Gateway.Namespace); problem != "" && resolved.Status == metav1.ConditionTrue {
			ref := pool.Spec.EndpointPickerRef
			refs = condition(inferencev1.InferencePoolConditionResolvedRefs, false, inferencev1.InferencePoolReasonInvalidExtensionRef,
				tlsMessage(fmt.Sprintf("Endpoint Picker Service %s/%s port %d", pool.Namespace, ref.Name, ref.Port.Number), problem)+
					" (FailOpen does not apply: a TLS setting that cannot be honoured is not an Endpoint Picker that fails to answer)")
		}
		conds := []metav1.Condition{accepted, refs}
		for i := range conds {
			conds[i].ObservedGeneration = pool.Generation
			conds[i].LastTransitionTime = now
		}
		out = append(out, inferencev1.ParentStatus{
			ParentRef: inferencev1.ParentReference{
				Group:     ptr.To(inferencev1.Group(GatewayGroup)),
				Kind:      GatewayKind,
				Namespace: inferencev1.Namespace(p.Gateway.Namespace),
				Name:      inferencev1.ObjectName(p.Gateway.Name),
			},
			ControllerName: inferencev1.ControllerName(controller),
			Conditions:     conds,
		})
	}
	slices.SortFunc(out, func(a, b inferencev1.ParentStatus) int {
		if c := strings.Compare(string(a.ParentRef.Namespace), string(b.ParentRef.Namespace)); c != 0 {
			return c
		}
		return strings.Compare(string(a.ParentRef.Name), string(b.ParentRef.Name))
	})
	return out
}

func condition(t inferencev1.InferencePoolConditionType, ok bool, reason inferencev1.InferencePoolReason, msg string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(t), Status: status, Reason: string(reason), Message: msg}
}

func acceptedCondition(pool *inferencev1.InferencePool, p PoolParent) metav1.Condition {
	const typ = inferencev1.InferencePoolConditionAccepted
	if pool.Spec.EndpointPickerRef == nil {
		return condition(typ, false, inferencev1.InferencePoolReasonEndpointPickerRefMissing,
			"spec.endpointPickerRef is not set: this implementation sends a pool's requests only through its Endpoint Picker")
	}
	routes := slices.Clone(p.Routes)
	slices.SortFunc(routes, func(a, b RouteAttachment) int {
		return strings.Compare(a.Kind+"/"+a.Route.String(), b.Kind+"/"+b.Route.String())
	})
	for _, r := range routes {
		if r.Accepted {
			return condition(typ, true, inferencev1.InferencePoolReasonAccepted,
				fmt.Sprintf("referenced by %s %s, accepted by Gateway %s", r.Kind, r.Route, p.Gateway))
		}
	}
	if len(routes) == 0 {
		return condition(typ, false, inferencev1.InferencePoolReasonHTTPRouteNotAccepted,
			fmt.Sprintf("no route referencing the pool is attached to Gateway %s", p.Gateway))
	}
	r := routes[0]
	return condition(typ, false, inferencev1.InferencePoolReasonHTTPRouteNotAccepted,
		fmt.Sprintf("%s %s is not accepted by Gateway %s: %s: %s", r.Kind, r.Route, p.Gateway, r.Reason, r.Message))
}

func resolvedRefsCondition(pool *inferencev1.InferencePool, epp *corev1.Service) metav1.Condition {
	const typ = inferencev1.InferencePoolConditionResolvedRefs
	ref := pool.Spec.EndpointPickerRef
	if ref == nil {
		return condition(typ, true, inferencev1.InferencePoolReasonResolvedRefs, "no references to resolve")
	}
	if problem := eppRefProblem(pool, epp); problem != "" {
		return condition(typ, false, inferencev1.InferencePoolReasonInvalidExtensionRef, problem)
	}
	return condition(typ, true, inferencev1.InferencePoolReasonResolvedRefs,
		fmt.Sprintf("Endpoint Picker Service %s/%s port %d", pool.Namespace, ref.Name, ref.Port.Number))
}

// PoolAccepted reports whether any of our status.parents entries of a pool
// says Accepted=True: a route referencing the pool is accepted by that
// Gateway, and the pool has an endpointPickerRef. Only an accepted pool gets
// a shadow Service: a pool no Gateway of ours serves must not make us write
// Services into its namespace. (Istio writes one for every pool with a
// gatewayParent, accepted or not.)
func PoolAccepted(parents []inferencev1.ParentStatus) bool {
	for _, p := range parents {
		for _, c := range p.Conditions {
			if c.Type == string(inferencev1.InferencePoolConditionAccepted) && c.Status == metav1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// referencedPools returns the pools that rules reference with a permitted
// reference: resolved, only missing (BackendNotFound), from a GRPCRoute
// to a pool that is not h2c (UnsupportedProtocol: the pool exists and may
// be used; the route's status says why this use is not served), or whose
// EPP's client TLS cannot be honoured (RouteReasonInvalidBackendTLS: the
// pool's status says so too). A reference that
// is not permitted (no ReferenceGrant), names a hostname, or is made while
// the extension is off does not make the route's Gateways the pool's
// parents: a route must not cause writes to a pool it may not use.
func referencedPools(rules []RuleResult) []types.NamespacedName {
	var out []types.NamespacedName
	for _, r := range rules {
		if r.Problem != "" {
			continue // not served: the pool gets no parent from it
		}
		for _, b := range r.Backends {
			if b.Group != InferencePoolGroup || b.Kind != InferencePoolKind {
				continue
			}
			if b.ResolvedRefs || b.Reason == gwv1.RouteReasonBackendNotFound || b.Reason == gwv1.RouteReasonUnsupportedProtocol ||
				b.Reason == RouteReasonInvalidBackendTLS {
				if !slices.Contains(out, b.Key) {
					out = append(out, b.Key)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// PoolGatewayParents folds the attachment results of routes (those that
// reference pool) into the pool's gatewayParents: one PoolParent per
// Gateway of ours that any of them names, accepted or not, sorted by
// Gateway, with each route's attachment to it.
func PoolGatewayParents(pool types.NamespacedName, routes []RouteResult) []PoolParent {
	byGateway := map[types.NamespacedName]*PoolParent{}
	var order []types.NamespacedName
	for _, r := range routes {
		if !slices.Contains(r.Pools, pool) {
			continue
		}
		for _, p := range r.Parents {
			pp := byGateway[p.Gateway]
			if pp == nil {
				pp = &PoolParent{Gateway: p.Gateway}
				byGateway[p.Gateway] = pp
				order = append(order, p.Gateway)
			}
			pp.Routes = append(pp.Routes, p.RouteAttachment(r.Route))
		}
	}
	slices.SortFunc(order, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	out := make([]PoolParent, 0, len(order))
	for _, g := range order {
		out = append(out, *byGateway[g])
	}
	return out
}
