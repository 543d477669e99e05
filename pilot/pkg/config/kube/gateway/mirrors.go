// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
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

// permittedHTTPFilters returns fs without the RequestMirror filters whose
// backendRef does not resolve (Gateway API: such a mirror is reported as
// ResolvedRefs=False and not configured), and the failed resolutions. fs is
// returned unchanged (not copied) when every mirror resolves.
func permittedHTTPFilters(routeKind, ns string, fs []gwv1.HTTPRouteFilter,
	resolve func(routeKind, ns string, ref gwv1.BackendRef) ResolvedBackend,
) ([]gwv1.HTTPRouteFilter, []ResolvedBackend) {
	var failed []ResolvedBackend
	var out []gwv1.HTTPRouteFilter
	for i, f := range fs {
		if f.Type == gwv1.HTTPRouteFilterRequestMirror && f.RequestMirror != nil {
			if rb := resolveMirror(routeKind, ns, f.RequestMirror, resolve); !rb.ResolvedRefs {
				if out == nil {
					out = append(make([]gwv1.HTTPRouteFilter, 0, len(fs)), fs[:i]...)
				}
				failed = append(failed, rb)
				continue
			}
		}
		if out != nil {
			out = append(out, f)
		}
	}
	if out == nil {
		return fs, nil
	}
	return out, failed
}

// permittedGRPCFilters is permittedHTTPFilters for GRPCRoute filters.
func permittedGRPCFilters(routeKind, ns string, fs []gwv1.GRPCRouteFilter,
	resolve func(routeKind, ns string, ref gwv1.BackendRef) ResolvedBackend,
) ([]gwv1.GRPCRouteFilter, []ResolvedBackend) {
	var failed []ResolvedBackend
	var out []gwv1.GRPCRouteFilter
	for i, f := range fs {
		if f.Type == gwv1.GRPCRouteFilterRequestMirror && f.RequestMirror != nil {
			if rb := resolveMirror(routeKind, ns, f.RequestMirror, resolve); !rb.ResolvedRefs {
				if out == nil {
					out = append(make([]gwv1.GRPCRouteFilter, 0, len(fs)), fs[:i]...)
				}
				failed = append(failed, rb)
				continue
			}
		}
		if out != nil {
			out = append(out, f)
		}
	}
	if out == nil {
		return fs, nil
	}
	return out, failed
}
