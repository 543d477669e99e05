// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// ExternalAuthFilterMessage says why an ExternalAuth filter in a
// backendRef's filters is refused: the Gateway API defines it for a rule's
// filters only, and a filter that cannot be honoured must not be skipped.
const ExternalAuthFilterMessage = "ExternalAuth is supported in a rule's filters, not in a backendRef's: " +
	"that backendRef's share of requests is answered 500"

// resolveExternalAuth resolves one ExternalAuth filter of an object of kind
// fromKind in namespace ns (an HTTPRoute's rule filter; the
// ReferenceGrant's "from"). Its backendRef must name a Service (core group,
// kind Service, a port that the Service has), in ns or permitted by a
// ReferenceGrant (RefNotPermitted, checked before existence), that exists
// (BackendNotFound); a GRPC filter needs a port that declares HTTP/2
// (UnsupportedProtocol: the port's cluster is shared with every route
// that sends to the port, so its protocol is the port's); client TLS that
// applies to the port (a BackendTLSPolicy, or a DestinationRule) and
// cannot be honoured makes it unusable (ResolveBackendRef's
// InvalidBackendTLS: the authorization server is never called in
// plaintext). Any other kind is InvalidKind. The result
// always carries the filter's settings; Invalid is set, and the
// ResolvedBackend returned, when it did not resolve.
func resolveExternalAuth(fromKind, ns string, f *gwv1.HTTPExternalAuthFilter, lk BackendLookups, opts BackendOptions) (*model.ExternalAuth, *ResolvedBackend) {
	ea := &model.ExternalAuth{Protocol: f.ExternalAuthProtocol}
	if f.GRPCAuthConfig != nil {
		ea.AllowedRequestHeaders = headerNames(f.GRPCAuthConfig.AllowedRequestHeaders)
	}
	if f.HTTPAuthConfig != nil {
		ea.AllowedRequestHeaders = headerNames(f.HTTPAuthConfig.AllowedRequestHeaders)
		ea.AllowedResponseHeaders = headerNames(f.HTTPAuthConfig.AllowedResponseHeaders)
		ea.PathPrefix = f.HTTPAuthConfig.Path
	}
	if f.ForwardBody != nil && f.ForwardBody.MaxSize > 0 {
		ea.MaxRequestBytes = uint32(f.ForwardBody.MaxSize)
	}
	rb := ResolveBackendRef(fromKind, ns, gwv1.BackendRef{BackendObjectReference: f.BackendRef}, lk, opts)
	fail := func(reason gwv1.RouteConditionReason, format string, args ...any) (*model.ExternalAuth, *ResolvedBackend) {
		rb.ResolvedRefs, rb.Reason, rb.Message = false, reason, "ExternalAuth backendRef: "+fmt.Sprintf(format, args...)
		ea.Service, ea.Invalid = nil, rb.Message
		return ea, &rb
	}
	switch {
	case rb.Group != "" || rb.Kind != serviceKind:
		return fail(gwv1.RouteReasonInvalidKind, "kind %s in group %q is not supported: only a Service can be an authorization server", rb.Kind, rb.Group)
	case !rb.ResolvedRefs:
		return fail(rb.Reason, "%s", rb.Message)
	}
	switch ea.Protocol {
	case gwv1.HTTPRouteExternalAuthGRPCProtocol, gwv1.HTTPRouteExternalAuthHTTPProtocol:
	default:
		return fail(gwv1.RouteReasonUnsupportedValue, "protocol %q is not GRPC or HTTP", ea.Protocol)
	}
	if f.BackendRef.Port == nil {
		return fail(gwv1.RouteReasonBackendNotFound, "Service %s: no port given", rb.Key)
	}
	var svc *corev1.Service
	if lk.Service != nil {
		svc = lk.Service(rb.Key)
	}
	if svc == nil || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(*f.BackendRef.Port) }) {
		return fail(gwv1.RouteReasonBackendNotFound, "Service %s has no port %d", rb.Key, *f.BackendRef.Port)
	}
	sb := rb.Service
	if ea.Protocol == gwv1.HTTPRouteExternalAuthGRPCProtocol && !sb.HTTP2 {
		return fail(gwv1.RouteReasonUnsupportedProtocol, "protocol GRPC needs HTTP/2, but %s", grpcToHTTP1ServiceMessage(svc, sb.Port, false))
	}
	if p := ea.PathPrefix; p != "" && !strings.HasPrefix(p, "/") {
		return fail(gwv1.RouteReasonUnsupportedValue, "http.path %q must start with \"/\": it is put before the request's path", p)
	}
	ea.Service = sb
	ea.Name = core.ExtAuthzFilterName(ea)
	return ea, nil
}

// headerNames are names lower-cased (HTTP header names are
// case-insensitive; Envoy's header maps hold them lower-case), sorted,
// without duplicates or empty names.
func headerNames(in []string) []string {
	var out []string
	for _, h := range in {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resolveRuleExternalAuth resolves the ExternalAuth filters of rule (an
// HTTPRoute rule of route) into rule.ExternalAuth, recording the failures
// in rule.AuthErrors, and records an ExternalAuth filter in a backendRef's
// filters as an error too (the translator answers 500 for that share).
func resolveRuleExternalAuth(rule *RuleResult, route Route, lk BackendLookups, opts BackendOptions) {
	if rule.HTTP == nil {
		return
	}
	for i := range rule.HTTP.Filters {
		f := &rule.HTTP.Filters[i]
		if f.Type != gwv1.HTTPRouteFilterExternalAuth || f.ExternalAuth == nil {
			continue
		}
		ea, failed := resolveExternalAuth(route.Kind, route.Namespace, f.ExternalAuth, lk, opts)
		rule.ExternalAuth = append(rule.ExternalAuth, ea)
		if failed != nil {
			rule.AuthErrors = append(rule.AuthErrors, *failed)
		}
	}
	for _, bfs := range rule.HTTPFilters {
		for _, f := range bfs {
			if f.Type == gwv1.HTTPRouteFilterExternalAuth {
				rule.AuthErrors = append(rule.AuthErrors, ResolvedBackend{Kind: "ExternalAuth",
					Reason: gwv1.RouteReasonUnsupportedValue, Message: ExternalAuthFilterMessage})
			}
		}
	}
}
