// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	registry "github.com/infermesh/infermesh/pilot/pkg/serviceregistry/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// BackendTLSPolicy for Service backends (Gateway API BackendTLSPolicy, v1):
// a policy targets Services of its namespace, each as a whole or one port
// by name (sectionName). For a Service port a route sends to, the policies
// naming that port apply if there are any, else those naming the Service
// as a whole; among several, the oldest wins (creationTimestamp, then
// name) and the others are Accepted=False/Conflicted. The winner's TLS is
// the port's (ServiceBackend.TLS); when the winner is invalid the port's
// traffic gets HTTP 500 (ServiceBackend.TLSProblem), never plaintext.
// Status goes on status.ancestors, one entry per Gateway of ours through
// which an accepted route sends to a targeted Service.

// PolicyTarget is one targetRef of a BackendTLSPolicy: a Service of the
// policy's namespace, and the port name when sectionName is set.
type PolicyTarget struct {
	Service types.NamespacedName
	Section string
}

// BackendTLSPolicyView is one BackendTLSPolicy resolved.
type BackendTLSPolicyView struct {
	Namespace, Name string
	Generation      int64
	Created         time.Time
	Targets         []PolicyTarget
	// TLS is the client TLS the policy asks for (Host and Source set per
	// Service when applied); nil when the policy is invalid.
	TLS *model.EPPTLS
	// Invalid, with InvalidReason (NoValidCACertificate or Invalid), is
	// why the policy cannot be applied: its Accepted=False condition.
	Invalid       string
	InvalidReason gwv1.PolicyConditionReason
	// RefsReason is the ResolvedRefs=False reason (InvalidKind,
	// InvalidCACertificateRef) when caCertificateRefs do not resolve; ""
	// when they do.
	RefsReason gwv1.PolicyConditionReason
}

// ResourceName is the krt key: namespace/name.
func (b BackendTLSPolicyView) ResourceName() string { return b.Namespace + "/" + b.Name }

// resolveBackendTLSPolicy builds the view of p, reading the ConfigMaps it
// names through configMap (nil when absent).
func resolveBackendTLSPolicy(p *gwv1.BackendTLSPolicy, configMap func(name string) *corev1.ConfigMap) BackendTLSPolicyView {
	v := BackendTLSPolicyView{Namespace: p.Namespace, Name: p.Name, Generation: p.Generation, Created: p.CreationTimestamp.Time,
		Targets: policyTargets(p)}
	tls, err := registry.ResolveBackendTLSPolicy(p, configMap)
	var caErr *registry.CARefError
	switch {
	case errors.As(err, &caErr):
		v.Invalid, v.InvalidReason, v.RefsReason = err.Error(), gwv1.BackendTLSPolicyReasonNoValidCACertificate, caErr.Reason
	case err != nil:
		v.Invalid, v.InvalidReason = err.Error(), gwv1.PolicyReasonInvalid
	default:
		v.TLS = tls
	}
	return v
}

// resolveTargetsOnly is the view of p with its targets only (no
// ConfigMap is read).
func resolveTargetsOnly(p *gwv1.BackendTLSPolicy) BackendTLSPolicyView {
	v := BackendTLSPolicyView{Namespace: p.Namespace, Name: p.Name}
	v.Targets = policyTargets(p)
	return v
}

// policyTargets are p's targetRefs that name Services, without repeats.
func policyTargets(p *gwv1.BackendTLSPolicy) []PolicyTarget {
	var out []PolicyTarget
	for _, r := range p.Spec.TargetRefs {
		if r.Group != "" || r.Kind != "Service" {
			continue
		}
		t := PolicyTarget{Service: types.NamespacedName{Namespace: p.Namespace, Name: string(r.Name)}, Section: string(ptr.Deref(r.SectionName, ""))}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// policyTargetsService is the index key of a Service a policy targets.
func policyTargetsService(b BackendTLSPolicyView) []string {
	var out []string
	for _, t := range b.Targets {
		if k := t.Service.String(); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// olderPolicy orders policies by precedence: the oldest first, then by
// namespace/name.
func olderPolicy(a, b BackendTLSPolicyView) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.ResourceName(), b.ResourceName())
}

// winningPolicy is the policy that applies to port portName of Service svc
// among policies (those targeting svc): the oldest naming the port, else
// the oldest naming the Service as a whole; false when none applies.
func winningPolicy(policies []BackendTLSPolicyView, svc types.NamespacedName, portName string) (BackendTLSPolicyView, bool) {
	sections := []string{""}
	if portName != "" {
		sections = []string{portName, ""}
	}
	for _, section := range sections {
		var cands []BackendTLSPolicyView
		for _, p := range policies {
			if slices.Contains(p.Targets, PolicyTarget{Service: svc, Section: section}) {
				cands = append(cands, p)
			}
		}
		if len(cands) > 0 {
			return slices.MinFunc(cands, olderPolicy), true
		}
	}
	return BackendTLSPolicyView{}, false
}

// serviceTLS is the TLS the policies targeting svc give its port portName,
// for a Service of host: the winning policy's TLS (with Host and Source
// set), its problem when it is invalid, or neither when no policy applies.
func serviceTLS(policies []BackendTLSPolicyView, svc types.NamespacedName, portName, host string) (*model.EPPTLS, string) {
	p, ok := winningPolicy(policies, svc, portName)
	if !ok {
		return nil, ""
	}
	if p.TLS == nil {
		return nil, fmt.Sprintf("BackendTLSPolicy %s is invalid: %s", p.ResourceName(), p.Invalid)
	}
	t := *p.TLS
	t.Host, t.Source = host, registry.BackendTLSPolicySource(p.Namespace, p.Name)
	return &t, ""
}

// conflicted reports whether p loses on every target it names to another
// policy naming the same Service and section (Gateway API: the older one
// wins; a policy naming the Service as a whole does not conflict with one
// naming a port).
func conflicted(p BackendTLSPolicyView, policies []BackendTLSPolicyView) bool {
	if len(p.Targets) == 0 {
		return false
	}
	for _, t := range p.Targets {
		winner := p
		for _, o := range policies {
			if slices.Contains(o.Targets, t) && olderPolicy(o, winner) < 0 {
				winner = o
			}
		}
		if winner.ResourceName() == p.ResourceName() {
			return false
		}
	}
	return true
}

// backendTLSPolicyConditions are a policy's Accepted and ResolvedRefs
// conditions for every ancestor (they do not depend on the Gateway).
func backendTLSPolicyConditions(p BackendTLSPolicyView, policies []BackendTLSPolicyView) []metav1.Condition {
	cond := func(typ string, ok bool, reason gwv1.PolicyConditionReason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: s, Reason: string(reason), Message: msg, ObservedGeneration: p.Generation}
	}
	var accepted, refs metav1.Condition
	switch {
	case p.Invalid != "":
		accepted = cond(string(gwv1.PolicyConditionAccepted), false, p.InvalidReason, p.Invalid)
	case conflicted(p, policies):
		accepted = cond(string(gwv1.PolicyConditionAccepted), false, gwv1.PolicyReasonConflicted,
			"an older BackendTLSPolicy targets the same Service (and sectionName) and takes precedence")
	default:
		accepted = cond(string(gwv1.PolicyConditionAccepted), true, gwv1.PolicyReasonAccepted, "policy accepted")
	}
	if p.RefsReason != "" {
		refs = cond(string(gwv1.BackendTLSPolicyConditionResolvedRefs), false, p.RefsReason, p.Invalid)
	} else {
		refs = cond(string(gwv1.BackendTLSPolicyConditionResolvedRefs), true, gwv1.BackendTLSPolicyReasonResolvedRefs, "references resolved")
	}
	return []metav1.Condition{accepted, refs}
}

// backendTLSPolicyAncestors are the status.ancestors entries of p: one per
// Gateway of ours in gateways, in order, each with conds.
func backendTLSPolicyAncestors(gateways []types.NamespacedName, controller string, conds []metav1.Condition) []gwv1.PolicyAncestorStatus {
	out := make([]gwv1.PolicyAncestorStatus, 0, len(gateways))
	for _, g := range gateways {
		out = append(out, gwv1.PolicyAncestorStatus{
			AncestorRef: gwv1.ParentReference{
				Group: ptr.To(gwv1.Group(GatewayGroup)), Kind: ptr.To(gwv1.Kind(GatewayKind)),
				Namespace: ptr.To(gwv1.Namespace(g.Namespace)), Name: gwv1.ObjectName(g.Name),
			},
			ControllerName: gwv1.GatewayController(controller),
			Conditions:     slices.Clone(conds),
		})
	}
	return out
}

// backendServices are the Services (namespace/name) a route's rules send
// to through a resolved backendRef.
func backendServices(r RouteResult) []string {
	var out []string
	for _, rule := range r.Rules {
		for _, b := range rule.Backends {
			if b.Service == nil {
				continue
			}
			if k := b.Key.String(); !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// fetchPolicies are the policies targeting Service svc.
func fetchPolicies(ctx krt.HandlerContext, idx krt.Index[string, BackendTLSPolicyView], svc types.NamespacedName) []BackendTLSPolicyView {
	if idx == nil {
		return nil
	}
	return idx.Fetch(ctx, svc.String())
}
