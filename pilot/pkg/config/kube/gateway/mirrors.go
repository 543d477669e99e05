// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"slices"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// resolveMirror resolves the backendRef of a RequestMirror filter
// (HTTPRequestMirrorFilter.backendRef) of a route of kind routeKind in
// namespace ns: it must be a Service that exists and, across namespaces, is
// allowed by a ReferenceGrant. A mirror to anything else is InvalidKind.
func resolveMirror(routeKind, ns string, m *gwv1.HTTPRequestMirrorFilter, resolve func(routeKind, ns string, ref gwv1.BackendRef) ResolvedBackend) ResolvedBackend {
	rb := resolve(routeKind, ns, gwv1.BackendRef{BackendObjectReference: m.BackendRef})
	if rb.ResolvedRefs && rb.Service == nil {
		rb.ResolvedRefs, rb.Reason = false, gwv1.RouteReasonInvalidKind
		rb.Message = "RequestMirror backendRef " + rb.Kind + " " + rb.Key.String() + " is not supported: only a Service can be mirrored to"
	}
	return rb
}

// permittedFilters returns fs without the RequestMirror filters whose
// backendRef does not resolve (Gateway API: such a mirror is reported as
// ResolvedRefs=False and not configured), the failed resolutions, and the
// resolved ones (their Service's client TLS reaches the model,
// model.Rule.Mirrors). mirror returns a filter's RequestMirror config, nil
// for other filter types. fs is returned unchanged (not copied) when every
// mirror resolves.
func permittedFilters[F any](routeKind, ns string, fs []F, mirror func(*F) *gwv1.HTTPRequestMirrorFilter,
	resolve func(routeKind, ns string, ref gwv1.BackendRef) ResolvedBackend,
) (kept []F, failed, resolved []ResolvedBackend) {
	var out []F
	for i := range fs {
		if m := mirror(&fs[i]); m != nil {
			rb := resolveMirror(routeKind, ns, m, resolve)
			if !rb.ResolvedRefs {
				if out == nil {
					out = append(make([]F, 0, len(fs)), fs[:i]...)
				}
				failed = append(failed, rb)
				continue
			}
			resolved = append(resolved, rb)
		}
		if out != nil {
			out = append(out, fs[i])
		}
	}
	if out == nil {
		return fs, nil, resolved
	}
	return out, failed, resolved
}

func httpMirror(f *gwv1.HTTPRouteFilter) *gwv1.HTTPRequestMirrorFilter {
	if f.Type == gwv1.HTTPRouteFilterRequestMirror {
		return f.RequestMirror
	}
	return nil
}

func grpcMirror(f *gwv1.GRPCRouteFilter) *gwv1.HTTPRequestMirrorFilter {
	if f.Type == gwv1.GRPCRouteFilterRequestMirror {
		return f.RequestMirror
	}
	return nil
}

// dropUnresolvedMirrors removes from rule the RequestMirror filters (of the
// rule and of its backendRefs) whose backendRef does not resolve, recording
// why in rule.MirrorErrors, and records the ones that resolve in
// rule.Mirrors. The rule is copied before it is changed: it points into
// the informer's object.
func dropUnresolvedMirrors(rule *RuleResult, route Route, resolve func(kind, ns string, ref gwv1.BackendRef) ResolvedBackend) {
	switch {
	case rule.HTTP != nil:
		fs, failed, ok := permittedFilters(route.Kind, route.Namespace, rule.HTTP.Filters, httpMirror, resolve)
		rule.Mirrors = append(rule.Mirrors, ok...)
		if failed != nil {
			cp := *rule.HTTP
			cp.Filters = fs
			rule.HTTP = &cp
			rule.MirrorErrors = append(rule.MirrorErrors, failed...)
		}
		for j, bfs := range rule.HTTPFilters {
			fs, failed, ok := permittedFilters(route.Kind, route.Namespace, bfs, httpMirror, resolve)
			rule.Mirrors = append(rule.Mirrors, ok...)
			if failed != nil {
				rule.HTTPFilters = slices.Clone(rule.HTTPFilters)
				rule.HTTPFilters[j] = fs
				rule.MirrorErrors = append(rule.MirrorErrors, failed...)
			}
		}
	case rule.GRPC != nil:
		fs, failed, ok := permittedFilters(route.Kind, route.Namespace, rule.GRPC.Filters, grpcMirror, resolve)
		rule.Mirrors = append(rule.Mirrors, ok...)
		if failed != nil {
			cp := *rule.GRPC
			cp.Filters = fs
			rule.GRPC = &cp
			rule.MirrorErrors = append(rule.MirrorErrors, failed...)
		}
		for j, bfs := range rule.GRPCFilters {
			fs, failed, ok := permittedFilters(route.Kind, route.Namespace, bfs, grpcMirror, resolve)
			rule.Mirrors = append(rule.Mirrors, ok...)
			if failed != nil {
				rule.GRPCFilters = slices.Clone(rule.GRPCFilters)
				rule.GRPCFilters[j] = fs
				rule.MirrorErrors = append(rule.MirrorErrors, failed...)
			}
		}
	}
}
