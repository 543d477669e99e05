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

// permittedFilters returns fs without the RequestMirror filters whose
// backendRef does not resolve (Gateway API: such a mirror is reported as
// ResolvedRefs=False and not configured), and the failed resolutions. mirror
// returns a filter's RequestMirror config, nil for other filter types. fs is
// returned unchanged (not copied) when every mirror resolves.
func permittedFilters[F any](routeKind, ns string, fs []F, mirror func(*F) *gwv1.HTTPRequestMirrorFilter,
	resolve func(routeKind, ns string, ref gwv1.BackendRef) ResolvedBackend,
) ([]F, []ResolvedBackend) {
	var failed []ResolvedBackend
	var out []F
	for i := range fs {
		if m := mirror(&fs[i]); m != nil {
			if rb := resolveMirror(routeKind, ns, m, resolve); !rb.ResolvedRefs {
				if out == nil {
					out = append(make([]F, 0, len(fs)), fs[:i]...)
				}
				failed = append(failed, rb)
				continue
			}
		}
		if out != nil {
			out = append(out, fs[i])
		}
	}
	if out == nil {
		return fs, nil
	}
	return out, failed
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
