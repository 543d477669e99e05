// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/upstreamtls"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Client TLS of every upstream (BackendTLSPolicy, Gateway API v1, and
// Istio DestinationRules): pilot/pkg/config/kube/upstreamtls decides it
// for a Service port; this file wires that into the routes' resolution and
// reports it. Every Service port a route sends to, mirrors to, or reaches
// as a pool's Endpoint Picker is resolved the same way (upstreamTLS.port):
// its TLS goes into the model (ServiceBackend.TLS, EPPBackend.TLS,
// Rule.Mirrors), and a setting that cannot be honoured makes the backend
// ResolvedRefs=False with RouteReasonInvalidBackendTLS, so its share is
// answered 500, never sent in plaintext or verified against another trust
// store. A DestinationRule's credentialName CA is read per Gateway
// namespace; a route whose Gateway lacks it says so on that parent only
// (RouteParentStatuses), and the translator answers 500 for that Gateway
// (model.EPPTLS.CAFor).
//
// BackendTLSPolicy status goes on status.ancestors, one entry per Gateway
// of ours through which an accepted route sends to, mirrors to, or calls
// the EPP of a targeted Service.

// RouteReasonInvalidBackendTLS is the route's ResolvedRefs=False reason
// for a backend whose BackendTLSPolicy or DestinationRule TLS cannot be
// honoured. The Gateway API defines no reason for it (RouteConditionReason
// lists RefNotPermitted, InvalidKind, BackendNotFound,
// UnsupportedProtocol, none of which says what is wrong); Envoy Gateway
// reports this case with ResolvedRefs=False/InvalidBackendTLS, which we
// follow.
const RouteReasonInvalidBackendTLS gwv1.RouteConditionReason = "InvalidBackendTLS"

// upstreamTLS is the krt side of upstreamtls: the resolved
// BackendTLSPolicies (by target Service) and DestinationRules (by host).
type upstreamTLS struct {
	// policies is nil without Inputs.BackendTLSPolicies.
	policies          krt.Collection[upstreamtls.Policy]
	policiesByService krt.Index[string, upstreamtls.Policy]
	// rulesByHost is nil without Inputs.DestinationRules.
	rulesByHost krt.Index[string, upstreamtls.Rule]
	secrets     krt.Collection[*corev1.Secret]
}

// buildUpstreamTLS resolves every BackendTLSPolicy (reading its CA
// ConfigMaps) and DestinationRule once per change, logging to opts.Logger,
// with the object's key, what is invalid or not applied.
func buildUpstreamTLS(in Inputs, opts Options, with func(string) []krt.CollectionOption) upstreamTLS {
	u := upstreamTLS{secrets: in.Secrets}
	if in.BackendTLSPolicies != nil {
		u.policies = krt.NewCollection(in.BackendTLSPolicies, func(ctx krt.HandlerContext, p *gwv1.BackendTLSPolicy) *upstreamtls.Policy {
			v := upstreamtls.ResolvePolicy(p, func(name string) *corev1.ConfigMap {
				if in.ConfigMaps == nil {
					return nil
				}
				if cm := krt.FetchOne(ctx, in.ConfigMaps, krt.FilterKey(p.Namespace+"/"+name)); cm != nil {
					return *cm
				}
				return nil
			})
			switch {
			case opts.Logger == nil:
			case v.Invalid != "":
				opts.Logger.Warn("gateway: BackendTLSPolicy is not accepted; the ports it wins are answered 500", "key", v.ResourceName(), "error", v.Invalid)
			case v.RefsMessage != "":
				opts.Logger.Warn("gateway: BackendTLSPolicy has CA references that do not resolve; only the others are trusted", "key", v.ResourceName(), "error", v.RefsMessage)
			}
			return &v
		}, with("BackendTLSPolicies")...)
		u.policiesByService = krt.NewIndex(u.policies, "backendtlspolicies-by-service", upstreamtls.Policy.TargetServices)
	}
	if in.DestinationRules != nil {
		rules := krt.NewCollection(in.DestinationRules, func(_ krt.HandlerContext, dr kubelib.DestinationRule) *upstreamtls.Rule {
			r := upstreamtls.ResolveRule(dr, opts.ClusterDomain)
			if opts.Logger != nil {
				if r.Problem != "" {
					opts.Logger.Warn("gateway: DestinationRule TLS cannot be honoured; the ports it wins are answered 500", "key", r.ResourceName(), "error", r.Problem)
				}
				for _, w := range r.Warnings {
					opts.Logger.Warn("gateway: DestinationRule TLS setting not applied", "key", r.ResourceName(), "warning", w)
				}
			}
			return &r
		}, with("DestinationRules")...)
		u.rulesByHost = krt.NewIndex(rules, "destinationrules-by-host", func(r upstreamtls.Rule) []string {
			if r.Host == "" {
				return nil
			}
			return []string{r.Host}
		})
	}
	return u
}

// lookup is the resolution of a Service port for the Gateways whose
// namespaces gatewayNamespaces returns (asked only when a DestinationRule's
// credentialName needs them), fetching in ctx what it reads; nil when
// neither policies nor rules exist (every port is plaintext).
func (u upstreamTLS) lookup(ctx krt.HandlerContext, gatewayNamespaces func() []string) func(upstreamtls.Port) upstreamtls.Result {
	if u.policiesByService == nil && u.rulesByHost == nil {
		return nil
	}
	var secret func(key types.NamespacedName) *corev1.Secret
	if u.secrets != nil {
		secret = func(key types.NamespacedName) *corev1.Secret {
			if s := krt.FetchOne(ctx, u.secrets, krt.FilterKey(key.String())); s != nil {
				return *s
			}
			return nil
		}
	}
	return func(port upstreamtls.Port) upstreamtls.Result {
		var src upstreamtls.Sources
		if u.policiesByService != nil {
			src.Policies = u.policiesByService.Fetch(ctx, port.Service.String())
		}
		if u.rulesByHost != nil {
			src.Rules = u.rulesByHost.Fetch(ctx, port.Host)
		}
		if len(src.Policies) == 0 && len(src.Rules) == 0 {
			return upstreamtls.Result{}
		}
		src.GatewayNamespaces, src.Secret = gatewayNamespaces(), secret
		return upstreamtls.Resolve(port, src)
	}
}

// servicePort is the upstreamtls.Port of port number port of svc, whose
// FQDN is host.
func servicePort(svc *corev1.Service, port int32, host string) upstreamtls.Port {
	return upstreamtls.Port{Service: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name},
		Name: servicePortName(svc, port), Host: host}
}

// tlsProblemIn is why a Gateway in namespace ns must not reach some
// upstream of r's rules (a DestinationRule credentialName CA it cannot
// read), naming the upstream; "" when it may reach them all.
func tlsProblemIn(r RouteResult, ns string) string {
	for _, rule := range r.Rules {
		for _, list := range [][]ResolvedBackend{rule.Backends, rule.Mirrors} {
			for _, b := range list {
				if p := backendTLSProblemIn(b, ns); p != "" {
					return p
				}
			}
		}
	}
	return ""
}

func backendTLSProblemIn(b ResolvedBackend, ns string) string {
	var t *model.EPPTLS
	var what string
	switch {
	case !b.ResolvedRefs:
		return ""
	case b.Service != nil:
		t, what = b.Service.TLS, fmt.Sprintf("Service %s port %d", b.Upstream, b.Service.Port)
	case b.Pool != nil && b.Pool.EPP != nil:
		t, what = b.Pool.EPP.TLS, fmt.Sprintf("InferencePool %s: Endpoint Picker Service %s port %d", b.Key, b.Upstream, b.Pool.EPP.Port)
	}
	if t == nil {
		return ""
	}
	if _, ok, problem := t.CAFor(ns); !ok {
		return fmt.Sprintf("%s: %s; its requests through Gateways of namespace %s are answered 500, never sent without TLS", what, problem, ns)
	}
	return ""
}

// conflicted reports whether p loses on every target it names to another
// policy naming the same Service and section (Gateway API: the older one
// wins; a policy naming the Service as a whole does not conflict with one
// naming a port).
func conflicted(p upstreamtls.Policy, policies []upstreamtls.Policy) bool {
	if len(p.Targets) == 0 {
		return false
	}
	for _, t := range p.Targets {
		winner := p
		for _, o := range policies {
			if slices.Contains(o.Targets, t) && upstreamtls.OlderPolicy(o, winner) < 0 {
				winner = o
			}
		}
		if winner.ResourceName() == p.ResourceName() {
			return false
		}
	}
	return true
}

// unattachedTargets are p's targetRefs that name a sectionName the
// Service has no port of (or a Service that does not exist), each as
// "Service ns/name sectionName x": the Gateway API says such a target
// must fail to attach, and the policy's status must say so. service
// looks a Service up by namespace/name.
func unattachedTargets(p upstreamtls.Policy, service func(key string) *corev1.Service) []string {
	var out []string
	for _, t := range p.Targets {
		svc := service(t.Service.String())
		switch {
		case svc == nil:
			out = append(out, "Service "+t.Service.String()+" does not exist")
		case t.Section != "" && !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == t.Section }):
			out = append(out, fmt.Sprintf("Service %s has no port named %q (sectionName)", t.Service, t.Section))
		}
	}
	return out
}

// backendTLSPolicyConditions are a policy's Accepted and ResolvedRefs
// conditions for every ancestor (they do not depend on the Gateway).
// unattached are its targets that attach to nothing (unattachedTargets):
// all of them is Accepted=False/TargetNotFound, some are named in the
// Accepted message.
func backendTLSPolicyConditions(p upstreamtls.Policy, policies []upstreamtls.Policy, unattached []string) []metav1.Condition {
	cond := func(typ string, ok bool, reason gwv1.PolicyConditionReason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: s, Reason: string(reason), Message: msg, ObservedGeneration: p.Generation}
	}
	var accepted, refs metav1.Condition
	switch {
	case len(p.Targets) > 0 && len(unattached) == len(p.Targets):
		accepted = cond(string(gwv1.PolicyConditionAccepted), false, gwv1.PolicyReasonTargetNotFound,
			"no targetRef attaches: "+strings.Join(unattached, "; ")+"; the policy applies to no port")
	case p.Invalid != "":
		accepted = cond(string(gwv1.PolicyConditionAccepted), false, p.InvalidReason,
			p.Invalid+"; requests to the Service ports this policy applies to are answered 500, never sent without TLS")
	case conflicted(p, policies):
		accepted = cond(string(gwv1.PolicyConditionAccepted), false, gwv1.PolicyReasonConflicted,
			"an older BackendTLSPolicy targets the same Service (and sectionName) and takes precedence")
	case len(unattached) > 0:
		accepted = cond(string(gwv1.PolicyConditionAccepted), true, gwv1.PolicyReasonAccepted,
			"policy accepted; these targetRefs attach to nothing: "+strings.Join(unattached, "; "))
	default:
		accepted = cond(string(gwv1.PolicyConditionAccepted), true, gwv1.PolicyReasonAccepted, "policy accepted")
	}
	if p.RefsReason != "" {
		refs = cond(string(gwv1.BackendTLSPolicyConditionResolvedRefs), false, p.RefsReason, p.RefsMessage)
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

// upstreamServices are the Services (namespace/name) whose client TLS a
// route's rules resolved: those it sends to or mirrors to and the EPP
// Services of its pools, whether or not their TLS could be honoured.
func upstreamServices(r RouteResult) []string {
	var out []string
	for _, rule := range r.Rules {
		for _, list := range [][]ResolvedBackend{rule.Backends, rule.Mirrors, rule.MirrorErrors} {
			for _, b := range list {
				if b.Upstream.Name == "" {
					continue
				}
				if k := b.Upstream.String(); !slices.Contains(out, k) {
					out = append(out, k)
				}
			}
		}
	}
	return out
}

// backendTLSPolicyStatuses derives our status.ancestors entries of each
// BackendTLSPolicy that targets a Service some accepted route of ours
// sends to, mirrors to, or calls as an EPP.
func backendTLSPolicyStatuses(in krt.Collection[*gwv1.BackendTLSPolicy], u upstreamTLS, routes krt.Collection[RouteResult],
	services krt.Collection[*corev1.Service], controller string, opts []krt.CollectionOption,
) krt.Collection[BackendTLSPolicyStatus] {
	routesByService := krt.NewIndex(routes, "routes-by-upstream-service", upstreamServices)
	return krt.NewCollection(in, func(ctx krt.HandlerContext, p *gwv1.BackendTLSPolicy) *BackendTLSPolicyStatus {
		self := krt.FetchOne(ctx, u.policies, krt.FilterKey(p.Namespace+"/"+p.Name))
		if self == nil {
			return nil
		}
		var gateways []types.NamespacedName
		var related []upstreamtls.Policy
		for _, svc := range self.TargetServices() {
			for _, r := range routesByService.Fetch(ctx, svc) {
				for _, parent := range r.Parents {
					if parent.Accepted && !slices.Contains(gateways, parent.Gateway) {
						gateways = append(gateways, parent.Gateway)
					}
				}
			}
			for _, o := range u.policiesByService.Fetch(ctx, svc) {
				if !slices.ContainsFunc(related, func(x upstreamtls.Policy) bool { return x.ResourceName() == o.ResourceName() }) {
					related = append(related, o)
				}
			}
		}
		if len(gateways) == 0 {
			return nil
		}
		slices.SortFunc(gateways, func(a, b types.NamespacedName) int { return cmp.Compare(a.String(), b.String()) })
		var unattached []string
		if services != nil {
			unattached = unattachedTargets(*self, func(key string) *corev1.Service {
				return ptr.Deref(krt.FetchOne(ctx, services, krt.FilterKey(key)), nil)
			})
		}
		return &BackendTLSPolicyStatus{Namespace: p.Namespace, Name: p.Name,
			Parents: backendTLSPolicyAncestors(gateways, controller, backendTLSPolicyConditions(*self, related, unattached))}
	}, opts...)
}

// gatewayNamespaces are the namespaces of parents' Gateways, each once.
func gatewayNamespaces(parents []ParentResult) []string {
	var out []string
	for _, p := range parents {
		if !slices.Contains(out, p.Gateway.Namespace) {
			out = append(out, p.Gateway.Namespace)
		}
	}
	return out
}

// tlsMessage is a backend's ResolvedRefs=False message for a TLS problem.
func tlsMessage(what, problem string) string {
	return what + ": " + strings.TrimSuffix(problem, ".") + "; its requests are answered 500, never sent without TLS"
}
