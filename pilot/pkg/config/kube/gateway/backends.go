// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/upstreamtls"
	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// InferencePoolGroup and InferencePoolKind name a backendRef to a GIE
// InferencePool.
const (
	InferencePoolGroup = "inference.networking.k8s.io"
	InferencePoolKind  = "InferencePool"
	serviceKind        = "Service"
)

// RouteReasonInvalidDestination is Istio's ResolvedRefs reason for a pool
// backendRef named by a hostname (not a Gateway API standard reason).
const RouteReasonInvalidDestination gwv1.RouteConditionReason = "InvalidDestination"

// Messages of InferencePool backendRef errors, exactly as Istio writes them.
const (
	InferencePoolNotEnabledMessage = "InferencePool is not enabled. To enable, set ENABLE_GATEWAY_API_INFERENCE_EXTENSION to true in istiod"
	InferencePoolHostnameMessage   = "the name of the InferencePool must be used, not the hostname"
)

// BackendLookups are the lookups ResolveBackendRef needs. Each returns nil
// when the object is missing.
type BackendLookups struct {
	Service func(key types.NamespacedName) *corev1.Service
	Pool    func(key types.NamespacedName) *inferencev1.InferencePool
	// ReferenceGrants returns the ReferenceGrants in namespace.
	ReferenceGrants func(namespace string) []*gwv1.ReferenceGrant
	// UpstreamTLS is the client TLS of a Service port, EPPs included
	// (upstreamtls.Resolve with the route's Gateway namespaces); nil: no
	// BackendTLSPolicies or DestinationRules exist, every port is
	// plaintext.
	UpstreamTLS func(port upstreamtls.Port) upstreamtls.Result
}

// BackendOptions are the settings ResolveBackendRef follows.
type BackendOptions struct {
	// InferenceEnabled is ENABLE_GATEWAY_API_INFERENCE_EXTENSION.
	InferenceEnabled bool
	// ClusterDomain, e.g. cluster.local.
	ClusterDomain string
}

// ResolvedBackend is one backendRef of a route rule, resolved: either
// ResolvedRefs with the target, or not, with the route's ResolvedRefs=False
// Reason and Message.
type ResolvedBackend struct {
	// Group and Kind are the backendRef's, defaulted ("" and Service).
	Group, Kind string
	Key         types.NamespacedName
	// Weight is backendRef.weight, default 1; 0 means no traffic.
	Weight int32
	// ResolvedRefs is false when the reference is invalid; Reason
	// (InvalidKind, RefNotPermitted, BackendNotFound, UnsupportedProtocol,
	// RouteReasonInvalidDestination) and Message say why.
	ResolvedRefs bool
	Reason       gwv1.RouteConditionReason
	Message      string
	// Upstream is the Service whose client TLS was resolved for this
	// backend: the Service itself, or a pool's Endpoint Picker Service;
	// set whether or not that TLS could be honoured (BackendTLSPolicy
	// status names the Gateways of such routes).
	Upstream types.NamespacedName
	// Service is set for a resolved Service backend.
	Service *ServiceBackend
	// Pool is set for a resolved InferencePool backend.
	Pool *PoolBackend
}

// ServiceBackend, PoolBackend and EPPBackend are the translator's view of a
// resolved backend (pilot/pkg/model).
type (
	ServiceBackend = model.ServiceBackend
	PoolBackend    = model.PoolBackend
	EPPBackend     = model.EPPBackend
)

// ResolveBackendRef resolves ref, a backendRef of a rule of a route of kind
// routeKind in routeNamespace (Gateway API HTTPBackendRef / GRPCBackendRef;
// the route is the ReferenceGrant's "from", group GatewayGroup; a
// TLSRoute's or TCPRoute's backendRef reaches Services only, an
// InferencePool from one is InvalidKind).
//
// Group and kind default to core Service. Supported: Service in the core
// group and InferencePool in InferencePoolGroup; anything else is
// InvalidKind. A Service needs a ReferenceGrant when it is in another
// namespace (RefNotPermitted) and must exist (BackendNotFound); the
// client TLS of its port (lk.UpstreamTLS) must be one that can be
// honoured (RouteReasonInvalidBackendTLS otherwise); a port that declares
// no protocol and has client TLS negotiates its HTTP version by ALPN
// (ServiceBackend.NegotiateHTTP, for every route kind); from a GRPCRoute,
// a port that neither declares HTTP/2 nor negotiates it is
// UnsupportedProtocol, with a message saying what would make it work
// (grpcToHTTP1ServiceMessage). For an
// InferencePool, in Istio's check order: the inference extension disabled is
// InvalidKind with InferencePoolNotEnabledMessage; a name with a dot is
// RouteReasonInvalidDestination with InferencePoolHostnameMessage; a
// cross-namespace pool without a ReferenceGrant is RefNotPermitted; a
// missing pool is BackendNotFound, and so is a pool whose Endpoint Picker
// does not resolve (no endpointPickerRef, or one that names no usable
// Service: poolEPPNotResolved), with a message naming the pool and its
// reference; a pool whose Endpoint Picker's client TLS cannot be honoured
// is RouteReasonInvalidBackendTLS (FailOpen or not: a configuration
// error is not an Endpoint Picker that does not answer, and routing
// around it would hide the error); then, from a GRPCRoute, a pool whose appProtocol is not
// kubernetes.io/h2c is UnsupportedProtocol (Gateway API GRPCBackendRef: a
// backend the route cannot reach in its declared protocol is invalid, and
// gRPC needs HTTP/2; the pool's one cluster keeps the pool's protocol for
// its other routes). The backendRef port is ignored for pools.
func ResolveBackendRef(routeKind, routeNamespace string, ref gwv1.BackendRef, lk BackendLookups, opts BackendOptions) ResolvedBackend {
	rb := ResolvedBackend{
		Group:  string(ptr.Deref(ref.Group, "")),
		Kind:   string(ptr.Deref(ref.Kind, serviceKind)),
		Key:    types.NamespacedName{Namespace: string(ptr.Deref(ref.Namespace, gwv1.Namespace(routeNamespace))), Name: string(ref.Name)},
		Weight: ptr.Deref(ref.Weight, 1),
	}
	fail := func(reason gwv1.RouteConditionReason, format string, args ...any) ResolvedBackend {
		rb.Reason, rb.Message = reason, fmt.Sprintf(format, args...)
		return rb
	}
	permitted := func() bool {
		if rb.Key.Namespace == routeNamespace {
			return true
		}
		var grants []*gwv1.ReferenceGrant
		if lk.ReferenceGrants != nil {
			grants = lk.ReferenceGrants(rb.Key.Namespace)
		}
		return ReferenceGrantAllows(grants, rb.Key.Namespace, GroupKind{GatewayGroup, routeKind}, routeNamespace,
			GroupKind{rb.Group, rb.Kind}, rb.Key.Name)
	}
	notPermitted := func() ResolvedBackend {
		return fail(gwv1.RouteReasonRefNotPermitted, "%s %s: no ReferenceGrant in namespace %s allows references from %s in namespace %s",
			rb.Kind, rb.Key, rb.Key.Namespace, routeKind, routeNamespace)
	}
	switch {
	case rb.Group == "" && rb.Kind == serviceKind:
		if !permitted() {
			return notPermitted()
		}
		var svc *corev1.Service
		if lk.Service != nil {
			svc = lk.Service(rb.Key)
		}
		if svc == nil {
			return fail(gwv1.RouteReasonBackendNotFound, "Service %s not found", rb.Key)
		}
		sb := &ServiceBackend{Host: serviceFQDN(rb.Key.Name, rb.Key.Namespace, opts.ClusterDomain)}
		if ref.Port != nil {
			sb.Port = int32(*ref.Port)
		}
		sb.HTTP2 = servicePortHTTP2(svc, sb.Port)
		rb.Upstream = rb.Key
		if lk.UpstreamTLS != nil {
			res := lk.UpstreamTLS(servicePort(svc, sb.Port, sb.Host))
			if res.Problem != "" {
				return fail(RouteReasonInvalidBackendTLS, "%s", tlsMessage(fmt.Sprintf("Service %s port %d", rb.Key, sb.Port), res.Problem))
			}
			sb.TLS = res.TLS
		}
		sb.NegotiateHTTP = !sb.HTTP2 && sb.TLS != nil && !servicePortDeclaresProtocol(svc, sb.Port)
		if routeKind == GRPCRouteKind && !sb.HTTP2 && !sb.NegotiateHTTP {
			return fail(gwv1.RouteReasonUnsupportedProtocol, "%s", grpcToHTTP1ServiceMessage(svc, sb.Port, true))
		}
		rb.ResolvedRefs, rb.Reason, rb.Service = true, gwv1.RouteReasonResolvedRefs, sb
		return rb
	case rb.Group == InferencePoolGroup && rb.Kind == InferencePoolKind && (routeKind == TLSRouteKind || routeKind == TCPRouteKind):
		// A pool's EPP picks an endpoint per HTTP request; a TLSRoute's
		// or TCPRoute's connections carry no request to pick by.
		return fail(gwv1.RouteReasonInvalidKind, "%s %s: a %s sends connections to Services only; an InferencePool needs an HTTPRoute or GRPCRoute",
			rb.Kind, rb.Key, routeKind)
	case rb.Group == InferencePoolGroup && rb.Kind == InferencePoolKind:
		if !opts.InferenceEnabled {
			return fail(gwv1.RouteReasonInvalidKind, "%s", InferencePoolNotEnabledMessage)
		}
		if strings.Contains(rb.Key.Name, ".") {
			return fail(RouteReasonInvalidDestination, "%s", InferencePoolHostnameMessage)
		}
		if !permitted() {
			return notPermitted()
		}
		var pool *inferencev1.InferencePool
		if lk.Pool != nil {
			pool = lk.Pool(rb.Key)
		}
		if pool == nil {
			return fail(gwv1.RouteReasonBackendNotFound, "InferencePool %s not found", rb.Key)
		}
		epp := eppService(pool, lk)
		if msg := poolEPPNotResolved(pool, epp); msg != "" {
			return fail(gwv1.RouteReasonBackendNotFound, "%s", msg)
		}
		pb := poolBackend(pool, epp, opts.ClusterDomain)
		rb.Upstream = types.NamespacedName{Namespace: epp.Namespace, Name: epp.Name}
		if lk.UpstreamTLS != nil {
			res := lk.UpstreamTLS(servicePort(epp, pb.EPP.Port, pb.EPP.Host))
			if res.Problem != "" {
				return fail(RouteReasonInvalidBackendTLS, "%s", tlsMessage(
					fmt.Sprintf("InferencePool %s: Endpoint Picker Service %s port %d", rb.Key, rb.Upstream, pb.EPP.Port), res.Problem))
			}
			pb.EPP.TLS = res.TLS
		}
		if routeKind == GRPCRouteKind && !pb.HTTP2() {
			return fail(gwv1.RouteReasonUnsupportedProtocol, "%s", grpcToHTTP1PoolMessage(pool))
		}
		rb.ResolvedRefs, rb.Reason, rb.Pool = true, gwv1.RouteReasonResolvedRefs, pb
		return rb
	default:
		return fail(gwv1.RouteReasonInvalidKind, "backendRef kind %s in group %q is not supported: only Service and %s.%s",
			rb.Kind, rb.Group, InferencePoolKind, InferencePoolGroup)
	}
}

// servicePortName is the name of svc's port, "" when it has none or no
// such port.
func servicePortName(svc *corev1.Service, port int32) string {
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return p.Name
		}
	}
	return ""
}

// servicePortHTTP2 is model.ServicePortHTTP2 of svc's port number port
// (false when the Service has no such port).
func servicePortHTTP2(svc *corev1.Service, port int32) bool {
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return model.ServicePortHTTP2(p.Name, ptr.Deref(p.AppProtocol, ""))
		}
	}
	return false
}

// servicePortDeclaresProtocol is model.ServicePortDeclaresProtocol of
// svc's port number port (true when the Service has no such port: there
// is nothing to negotiate with).
func servicePortDeclaresProtocol(svc *corev1.Service, port int32) bool {
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return model.ServicePortDeclaresProtocol(p.Name, ptr.Deref(p.AppProtocol, ""))
		}
	}
	return true
}

// grpcToHTTP1ServiceMessage says why a GRPCRoute (or a gRPC ExternalAuth)
// cannot use a Service port that neither declares HTTP/2 nor negotiates
// it, and what would make it work. The port's cluster is shared with the
// HTTPRoutes that use it; turning it HTTP/2 for one GRPCRoute would change
// what those routes' requests get. When tlsNegotiates, a port that
// declares no protocol would also do with client TLS (a BackendTLSPolicy
// or DestinationRule): HTTP/2 is then negotiated by ALPN
// (model.ServiceBackend.NegotiateHTTP); the message says so only for such
// a port.
func grpcToHTTP1ServiceMessage(svc *corev1.Service, port int32, tlsNegotiates bool) string {
	declared, undeclared := "has no port "+fmt.Sprint(port), false
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			declared = fmt.Sprintf("port %d declares no HTTP/2 protocol (appProtocol %q, name %q)", port, ptr.Deref(p.AppProtocol, ""), p.Name)
			undeclared = !model.ServicePortDeclaresProtocol(p.Name, ptr.Deref(p.AppProtocol, ""))
		}
	}
	fix := fmt.Sprintf("set the port's appProtocol to %q (HTTP/2 without TLS)", "kubernetes.io/h2c")
	if tlsNegotiates && undeclared {
		fix += ", or give the port TLS with a BackendTLSPolicy (HTTP/2 is then negotiated by ALPN)"
	}
	return fmt.Sprintf("Service %s/%s %s, so it is served over HTTP/1.1, which cannot carry gRPC: %s",
		svc.Namespace, svc.Name, declared, fix)
}

// grpcToHTTP1PoolMessage says why a GRPCRoute cannot use pool, whose
// model servers speak HTTP/1.1, and what the pool would have to declare.
func grpcToHTTP1PoolMessage(pool *inferencev1.InferencePool) string {
	declared := "has no appProtocol"
	if pool.Spec.AppProtocol != "" {
		declared = fmt.Sprintf("has appProtocol %q", pool.Spec.AppProtocol)
	}
	return fmt.Sprintf("InferencePool %s/%s %s (HTTP/1.1), which cannot carry gRPC: "+
		"a GRPCRoute needs the pool's spec.appProtocol to be %q (HTTP/2 without TLS)",
		pool.Namespace, pool.Name, declared, inferencev1.AppProtocolH2C)
}

func serviceFQDN(name, namespace, domain string) string {
	return name + "." + namespace + ".svc." + domain
}

// eppService returns the Service that pool's endpointPickerRef names in the
// pool's namespace, nil when there is none (no reference, or no such
// Service). Looking it up registers the dependency, so the route is
// recomputed when the Service appears, changes or goes.
func eppService(pool *inferencev1.InferencePool, lk BackendLookups) *corev1.Service {
	r := pool.Spec.EndpointPickerRef
	if r == nil || r.Name == "" || lk.Service == nil {
		return nil
	}
	return lk.Service(types.NamespacedName{Namespace: pool.Namespace, Name: string(r.Name)})
}

// poolBackend is the translator's view of pool, whose Endpoint Picker epp
// resolved (poolEPPNotResolved returned "").
func poolBackend(pool *inferencev1.InferencePool, epp *corev1.Service, domain string) *PoolBackend {
	shadow := ShadowServiceName(pool.Name)
	pb := &PoolBackend{
		Namespace:     pool.Namespace,
		Name:          pool.Name,
		ShadowService: shadow,
		Host:          serviceFQDN(shadow, pool.Namespace, domain),
		Port:          ShadowServiceBasePort,
		AppProtocol:   pool.Spec.AppProtocol,
	}
	if pb.AppProtocol == "" {
		pb.AppProtocol = inferencev1.AppProtocolHTTP
	}
	for _, p := range pool.Spec.TargetPorts {
		pb.TargetPorts = append(pb.TargetPorts, int32(p.Number))
	}
	r := pool.Spec.EndpointPickerRef
	pb.EPP = &EPPBackend{Service: string(r.Name), Host: serviceFQDN(string(r.Name), pool.Namespace, domain),
		Port: int32(r.Port.Number), FailureMode: FailureMode(pool)}
	for _, p := range epp.Spec.Ports {
		if p.Port == pb.EPP.Port {
			pb.EPP.AppProtocol = ptr.Deref(p.AppProtocol, "")
		}
	}
	return pb
}

// RouteResolvedRefs folds the resolved backendRefs of all of a route's rules,
// in rule and backendRef order, into the route's ResolvedRefs condition per
// parent (Gateway API RouteConditionResolvedRefs): True/ResolvedRefs when
// every reference resolved, else False with the reason and message of the
// first that did not.
func RouteResolvedRefs(backends []ResolvedBackend) (ok bool, reason gwv1.RouteConditionReason, message string) {
	for _, b := range backends {
		if !b.ResolvedRefs {
			return false, b.Reason, b.Message
		}
	}
	return true, gwv1.RouteReasonResolvedRefs, "all references resolved"
}
