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
		fs, changed, bfs := withoutUnresolvedMirrors(rule, route, rule.HTTP.Filters, rule.HTTPFilters, httpMirror, resolve)
		if changed {
			cp := *rule.HTTP
			cp.Filters = fs
			rule.HTTP = &cp
		}
		rule.HTTPFilters = bfs
	case rule.GRPC != nil:
		fs, changed, bfs := withoutUnresolvedMirrors(rule, route, rule.GRPC.Filters, rule.GRPCFilters, grpcMirror, resolve)
		if changed {
			cp := *rule.GRPC
			cp.Filters = fs
			rule.GRPC = &cp
		}
		rule.GRPCFilters = bfs
	}
}

// withoutUnresolvedMirrors applies permittedFilters to a rule's own filters
// (fs) and to each of its backendRefs' filters (perBackend), adding the
// resolved mirrors to rule.Mirrors and the failed ones to rule.MirrorErrors.
// It returns the rule's filters, whether they lost a mirror, and the
// backendRefs' filters (perBackend itself unless one of them lost a mirror,
// else a copy: perBackend points into the informer's object).
func withoutUnresolvedMirrors[F any](rule *RuleResult, route Route, fs []F, perBackend [][]F,
	mirror func(*F) *gwv1.HTTPRequestMirrorFilter, resolve func(kind, ns string, ref gwv1.BackendRef) ResolvedBackend,
) (kept []F, changed bool, keptPerBackend [][]F) {
	kept, failed, ok := permittedFilters(route.Kind, route.Namespace, fs, mirror, resolve)
	rule.Mirrors = append(rule.Mirrors, ok...)
	rule.MirrorErrors = append(rule.MirrorErrors, failed...)
	keptPerBackend = perBackend
	copied := false
	for j, bfs := range perBackend {
		bkept, bfailed, bok := permittedFilters(route.Kind, route.Namespace, bfs, mirror, resolve)
		rule.Mirrors = append(rule.Mirrors, bok...)
		if bfailed == nil {
			continue
		}
		if !copied {
			keptPerBackend, copied = slices.Clone(perBackend), true
		}
		keptPerBackend[j] = bkept
		rule.MirrorErrors = append(rule.MirrorErrors, bfailed...)
	}
	return kept, failed != nil, keptPerBackend
}
