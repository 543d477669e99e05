// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// listenerSets resolves a route's ListenerSet parentRef to the
// ListenerSet's Gateway; nil without ListenerSets.
func (b *builder) listenerSets(ctx krt.HandlerContext) ListenerSetLookup {
	if b.in.ListenerSets == nil {
		return nil
	}
	return func(key types.NamespacedName) (types.NamespacedName, bool) {
		ls := krt.FetchOne(ctx, b.in.ListenerSets, krt.FilterKey(key.String()))
		if ls == nil {
			return types.NamespacedName{}, false
		}
		return ListenerSetParent(*ls)
	}
}

// serviceLookups are the Service, ReferenceGrant and upstream TLS lookups
// of objects used by the Gateways of gatewayNamespaces, each through ctx.
func (b *builder) serviceLookups(ctx krt.HandlerContext, gatewayNamespaces func() []string) BackendLookups {
	in := b.in
	return BackendLookups{
		Service: func(key types.NamespacedName) *corev1.Service {
			if s := krt.FetchOne(ctx, in.Services, krt.FilterKey(key.String())); s != nil {
				return *s
			}
			return nil
		},
		ReferenceGrants: func(ns string) []*gwv1.ReferenceGrant {
			return krt.Fetch(ctx, in.ReferenceGrants, krt.FilterNamespace(ns))
		},
		UpstreamTLS: b.tls.lookup(ctx, gatewayNamespaces),
	}
}

// routeLookups are what a route's attachment and backends read, each
// through ctx; gatewayNamespaces are the namespaces a DestinationRule's
// credentialName CA is read in.
func (b *builder) routeLookups(ctx krt.HandlerContext, gatewayNamespaces func() []string) (GatewayLookup, NamespaceLabels, BackendLookups) {
	in := b.in
	gateways := func(key types.NamespacedName) *GatewayView {
		return krt.FetchOne(ctx, b.gateways, krt.FilterKey(key.String()))
	}
	nsLabels := func(name string) map[string]string {
		if ns := krt.FetchOne(ctx, in.Namespaces, krt.FilterKey(name)); ns != nil {
			return (*ns).Labels
		}
		return nil
	}
	backends := b.serviceLookups(ctx, gatewayNamespaces)
	if b.pools != nil {
		backends.Pool = func(key types.NamespacedName) *inferencev1.InferencePool {
			if p := krt.FetchOne(ctx, b.pools, krt.FilterKey(key.String())); p != nil {
				return *p
			}
			return nil
		}
	}
	return gateways, nsLabels, backends
}

// resolveRoute attaches route and resolves the backendRefs of its rules
// (refs(i) are rule i's); nil when it names no Gateway of ours.
func (b *builder) resolveRoute(ctx krt.HandlerContext, route Route, meta *metav1.ObjectMeta, rules []RuleResult,
	refs func(i int) []gwv1.BackendRef,
) *RouteResult {
	var parents []ParentResult
	// A DestinationRule's credentialName CA is read in the namespace
	// of each Gateway that will use it: the parents'.
	gateways, nsLabels, lk := b.routeLookups(ctx, func() []string { return gatewayNamespaces(parents) })
	parents = AttachRouteWithListenerSets(route, gateways, b.listenerSets(ctx), nsLabels)
	if len(parents) == 0 {
		return nil
	}
	res := &RouteResult{Route: route, Generation: meta.Generation, Created: meta.CreationTimestamp.Time,
		Parents: parents, Rules: rules}
	backendOpts := BackendOptions{InferenceEnabled: b.opts.InferenceEnabled, ClusterDomain: b.opts.ClusterDomain}
	resolveRef := func(kind, ns string, ref gwv1.BackendRef) ResolvedBackend {
		return ResolveBackendRef(kind, ns, ref, lk, backendOpts)
	}
	for i := range res.Rules {
		for _, ref := range refs(i) {
			res.Rules[i].Backends = append(res.Rules[i].Backends, resolveRef(route.Kind, route.Namespace, ref))
		}
		dropUnresolvedMirrors(&res.Rules[i], route, resolveRef)
		resolveRuleExternalAuth(&res.Rules[i], route, lk, backendOpts)
	}
	checkRules(res, core.Options{InferenceEnabled: b.opts.InferenceEnabled, ClusterDomain: b.opts.ClusterDomain})
	res.Pools = referencedPools(res.Rules)
	return res
}

// httpRouteCollection is every HTTPRoute that names a Gateway of ours,
// attached and with its backends resolved.
func (b *builder) httpRouteCollection() krt.Collection[RouteResult] {
	return krt.NewCollection(b.in.HTTPRoutes, func(ctx krt.HandlerContext, r *gwv1.HTTPRoute) *RouteResult {
		route := Route{Kind: HTTPRouteKind, Namespace: r.Namespace, Name: r.Name, Hostnames: r.Spec.Hostnames, ParentRefs: r.Spec.ParentRefs}
		rules := make([]RuleResult, len(r.Spec.Rules))
		for i := range r.Spec.Rules {
			rules[i].HTTP = &r.Spec.Rules[i]
			for _, ref := range r.Spec.Rules[i].BackendRefs {
				rules[i].HTTPFilters = append(rules[i].HTTPFilters, ref.Filters)
			}
		}
		return b.resolveRoute(ctx, route, &r.ObjectMeta, rules, func(i int) []gwv1.BackendRef {
			refs := make([]gwv1.BackendRef, len(r.Spec.Rules[i].BackendRefs))
			for j, ref := range r.Spec.Rules[i].BackendRefs {
				refs[j] = ref.BackendRef
			}
			return refs
		})
	}, b.with("HTTPRoutes")...)
}

// grpcRouteCollection is every GRPCRoute that names a Gateway of ours,
// attached and with its backends resolved.
func (b *builder) grpcRouteCollection() krt.Collection[RouteResult] {
	return krt.NewCollection(b.in.GRPCRoutes, func(ctx krt.HandlerContext, r *gwv1.GRPCRoute) *RouteResult {
		route := Route{Kind: GRPCRouteKind, Namespace: r.Namespace, Name: r.Name, Hostnames: r.Spec.Hostnames, ParentRefs: r.Spec.ParentRefs}
		rules := make([]RuleResult, len(r.Spec.Rules))
		for i := range r.Spec.Rules {
			rules[i].GRPC = &r.Spec.Rules[i]
			for _, ref := range r.Spec.Rules[i].BackendRefs {
				rules[i].GRPCFilters = append(rules[i].GRPCFilters, ref.Filters)
			}
		}
		return b.resolveRoute(ctx, route, &r.ObjectMeta, rules, func(i int) []gwv1.BackendRef {
			refs := make([]gwv1.BackendRef, len(r.Spec.Rules[i].BackendRefs))
			for j, ref := range r.Spec.Rules[i].BackendRefs {
				refs[j] = ref.BackendRef
			}
			return refs
		})
	}, b.with("GRPCRoutes")...)
}

// tlsRouteCollection is every TLSRoute that names a Gateway of ours,
// attached and with its backends resolved.
func (b *builder) tlsRouteCollection() krt.Collection[RouteResult] {
	return krt.NewCollection(b.in.TLSRoutes, func(ctx krt.HandlerContext, r *gwv1.TLSRoute) *RouteResult {
		route := Route{Kind: TLSRouteKind, Namespace: r.Namespace, Name: r.Name, Hostnames: r.Spec.Hostnames, ParentRefs: r.Spec.ParentRefs}
		rules := make([]RuleResult, len(r.Spec.Rules))
		for i := range r.Spec.Rules {
			rules[i].TLS = &r.Spec.Rules[i]
		}
		return b.resolveRoute(ctx, route, &r.ObjectMeta, rules, func(i int) []gwv1.BackendRef { return r.Spec.Rules[i].BackendRefs })
	}, b.with("TLSRoutes")...)
}

// tcpRouteCollection is every TCPRoute that names a Gateway of ours,
// attached and with its backends resolved.
func (b *builder) tcpRouteCollection() krt.Collection[RouteResult] {
	return krt.NewCollection(b.in.TCPRoutes, func(ctx krt.HandlerContext, r *gwv1.TCPRoute) *RouteResult {
		route := Route{Kind: TCPRouteKind, Namespace: r.Namespace, Name: r.Name, ParentRefs: r.Spec.ParentRefs}
		rules := make([]RuleResult, len(r.Spec.Rules))
		for i := range r.Spec.Rules {
			rules[i].TCP = &r.Spec.Rules[i]
		}
		return b.resolveRoute(ctx, route, &r.ObjectMeta, rules, func(i int) []gwv1.BackendRef { return r.Spec.Rules[i].BackendRefs })
	}, b.with("TCPRoutes")...)
}

// routeAttachmentCollection is each route's attachment results alone
// (routeAttachment), what the Gateways' and ListenerSets' statuses read.
func (b *builder) routeAttachmentCollection(routes krt.Collection[RouteResult]) krt.Collection[routeAttachment] {
	return krt.NewCollection(routes, func(ctx krt.HandlerContext, r RouteResult) *routeAttachment {
		return &routeAttachment{Key: r.ResourceName(), Parents: r.Parents}
	}, b.with("RouteAttachments")...)
}
