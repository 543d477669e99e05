// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/upstreamtls"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Inputs are the collections the controller reads. In a cluster they are
// kube.Client's informer collections; in file mode, static collections of
// the manifests. InferencePools is nil when the inference extension is off
// (no InferencePool informer is started); GRPCRoutes, TLSRoutes and
// TCPRoutes may be nil when their CRD is not served.
type Inputs struct {
	GatewayClasses  krt.Collection[*gwv1.GatewayClass]
	Gateways        krt.Collection[*gwv1.Gateway]
	HTTPRoutes      krt.Collection[*gwv1.HTTPRoute]
	GRPCRoutes      krt.Collection[*gwv1.GRPCRoute]
	TLSRoutes       krt.Collection[*gwv1.TLSRoute]
	TCPRoutes       krt.Collection[*gwv1.TCPRoute]
	ReferenceGrants krt.Collection[*gwv1.ReferenceGrant]
	Namespaces      krt.Collection[*corev1.Namespace]
	Services        krt.Collection[*corev1.Service]
	InferencePools  krt.Collection[*inferencev1.InferencePool]
	// ConfigMaps are read for GatewayClass parameters (classparams.go); nil
	// means none exist.
	ConfigMaps krt.Collection[*corev1.ConfigMap]
	// Secrets are read for HTTPS listeners' tls.certificateRefs
	// (certificates.go) and DestinationRules' credentialName CA bundles
	// (upstreamtls.CredentialCA); nil means none exist. Only a Secret's
	// type, tls.crt, tls.key, cacert and ca.crt are used
	// (kube.TLSSecretTransform keeps no more).
	Secrets krt.Collection[*corev1.Secret]
	// BackendTLSPolicies and DestinationRules give Service ports client
	// TLS, EPPs included (backendtls.go, pilot/pkg/config/kube/upstreamtls),
	// reading their CA bundles from ConfigMaps and, for a DestinationRule's
	// credentialName, Secrets; nil means none exist.
	BackendTLSPolicies krt.Collection[*gwv1.BackendTLSPolicy]
	DestinationRules   krt.Collection[kubelib.DestinationRule]
	// ListenerSets add listeners to the Gateways that admit them
	// (listenerset.go); nil means none exist.
	ListenerSets krt.Collection[*gwv1.ListenerSet]
	// ExternalProcessors (infermesh.io) are what listener filters of type
	// ExtensionRef name (listenerfilters.go); nil means none exist.
	ExternalProcessors krt.Collection[*imv1alpha1.ExternalProcessor]
}

// Options are the controller's settings (pilot/pkg/features).
type Options struct {
	// ControllerName is PILOT_GATEWAY_API_CONTROLLER_NAME: GatewayClasses
	// with this spec.controllerName are ours, and our status entries carry it.
	ControllerName string
	// ClusterDomain builds Service FQDNs, e.g. cluster.local.
	ClusterDomain string
	// InferenceEnabled is ENABLE_GATEWAY_API_INFERENCE_EXTENSION. When it is
	// false, Inputs.InferencePools is ignored and a backendRef to a pool gets
	// InferencePoolNotEnabledMessage.
	InferenceEnabled bool
	// Limits bound what one namespace's routes put into one Gateway
	// (tenantlimits.go); zero values, no limit.
	Limits TenantLimits
	// Krt are options for every collection built (stop channel, debug
	// handler).
	Krt []krt.CollectionOption
	// Logger, when set, gets a warning, with the object's key, each time a
	// BackendTLSPolicy or DestinationRule resolves to TLS that cannot be
	// honoured or a setting that is not applied; nil logs nothing (status
	// -f and check -f print these problems themselves).
	Logger *slog.Logger
}

// Outputs are the controller's derived collections. The pool collections are
// nil when the inference extension is off; GRPCRouteStatuses,
// TLSRouteStatuses and TCPRouteStatuses are nil without their input.
type Outputs struct {
	// ClassStatuses is the Accepted condition of each of our GatewayClasses.
	ClassStatuses krt.Collection[ClassStatus]
	// Gateways is our validated view of each Gateway of our classes.
	Gateways krt.Collection[GatewayView]
	// GatewayStatuses is the status of each of our Gateways.
	GatewayStatuses krt.Collection[GatewayStatusResult]
	// Routes is every HTTPRoute, GRPCRoute, TLSRoute and TCPRoute that
	// names a Gateway of ours,
	// attached and with its backends resolved.
	Routes krt.Collection[RouteResult]
	// HTTPRouteStatuses and GRPCRouteStatuses are our entries of each
	// route's status.parents.
	HTTPRouteStatuses krt.Collection[RouteStatus]
	GRPCRouteStatuses krt.Collection[RouteStatus]
	TLSRouteStatuses  krt.Collection[RouteStatus]
	TCPRouteStatuses  krt.Collection[RouteStatus]
	// GatewayParents is each pool's gatewayParents: pools that no route of
	// ours references are absent.
	GatewayParents krt.Collection[GatewayParents]
	// InferencePools is the InferencePool object of each pool with at least
	// one gatewayParent.
	InferencePools krt.Collection[InferencePoolObject]
	// PoolStatuses and ShadowServices come from one derivation over
	// InferencePools; only a pool that some parent accepts (PoolAccepted)
	// has a shadow Service.
	PoolStatuses   krt.Collection[PoolStatus]
	ShadowServices krt.Collection[ShadowServiceApply]
	// Models is, per Gateway of ours, its model.Gateway: what the xDS
	// translator needs.
	Models krt.Collection[model.Gateway]
	// BackendTLSPolicies is every BackendTLSPolicy resolved (its TLS, or
	// why it is invalid), whether or not a route uses it; nil without
	// Inputs.BackendTLSPolicies.
	BackendTLSPolicies krt.Collection[upstreamtls.Policy]
	// BackendTLSPolicyStatuses are our status.ancestors entries of each
	// BackendTLSPolicy that targets a Service our routes send to, mirror
	// to or call as an EPP; nil without Inputs.BackendTLSPolicies.
	BackendTLSPolicyStatuses krt.Collection[BackendTLSPolicyStatus]
	// ListenerSetStatuses is the status of each ListenerSet whose parent is
	// a Gateway of ours, Programmed still Pending (WithListenerSetProgrammed
	// applies the Gateway's); nil without Inputs.ListenerSets.
	ListenerSetStatuses krt.Collection[ListenerSetStatusResult]
	// ExternalProcessorStatuses is the status of every infermesh.io
	// ExternalProcessor (processorstatus.go); nil without
	// Inputs.ExternalProcessors.
	ExternalProcessorStatuses krt.Collection[ExternalProcessorStatus]
}

// Build derives every collection of the controller from in, one builder
// per output (gateway_collections.go, route_collections.go,
// pool_collections.go). The shape, from inputs to outputs:
//
//	GatewayClasses ─► ClassStatuses
//	Gateways (+classes, ListenerSets by parent) ─► Gateways ─► GatewayStatuses,
//	  ListenerSetStatuses, Models
//	HTTPRoutes, GRPCRoutes, TLSRoutes, TCPRoutes (+Gateways, ListenerSets,
//	  Namespaces, Services, InferencePools, ReferenceGrants) ─► Routes ─►
//	  HTTPRouteStatuses, GRPCRouteStatuses, TLSRouteStatuses,
//	  TCPRouteStatuses
//	Routes ─► route attachments (by Gateway, ListenerSet) ─► GatewayStatuses,
//	  ListenerSetStatuses
//	Routes ─► route models (by Gateway) ─► Models
//	Routes indexed by pool ─► GatewayParents ─► InferencePools (+pool, EPP
//	  Service) ─► PoolStatuses and ShadowServices (one derivation)
//
// Every transformation is pure and reads its inputs through krt.Fetch, so a
// change recomputes only what read it.
func Build(in Inputs, opts Options) Outputs {
	b := &builder{in: in, opts: opts, pools: in.InferencePools}
	if !opts.InferenceEnabled {
		b.pools = nil
	}
	var out Outputs
	// Upstream TLS first: a listener filter's processor reads it.
	b.tls = buildUpstreamTLS(in, opts, b.with)
	out.BackendTLSPolicies = b.tls.policies

	classParams := b.classParamsCollection()
	out.ClassStatuses = b.classStatusCollection(classParams)
	out.Gateways = b.gatewayCollection(classParams)
	b.gateways = out.Gateways

	httpRoutes := b.httpRouteCollection()
	routes := []krt.Collection[RouteResult]{httpRoutes}
	// byKind are the resolved routes of each kind but HTTPRoute, whose
	// statuses read them when no limits apply.
	byKind := map[string]krt.Collection[RouteResult]{}
	if in.GRPCRoutes != nil {
		grpcRoutes := b.grpcRouteCollection()
		routes = append(routes, grpcRoutes)
		byKind[GRPCRouteKind] = grpcRoutes
	}
	if in.TLSRoutes != nil {
		tlsRoutes := b.tlsRouteCollection()
		routes = append(routes, tlsRoutes)
		byKind[TLSRouteKind] = tlsRoutes
	}
	if in.TCPRoutes != nil {
		tcpRoutes := b.tcpRouteCollection()
		routes = append(routes, tcpRoutes)
		byKind[TCPRouteKind] = tcpRoutes
	}
	// Routes as resolved, then with the per-namespace limits of each
	// Gateway applied (tenantlimits.go): what every later step reads.
	if opts.Limits.enabled() {
		out.Routes = limitRoutes(krt.JoinCollection(routes, b.with("ResolvedRoutes")...), out.Gateways, opts.Limits, b.with)
		out.HTTPRouteStatuses = routeStatuses(out.Routes, HTTPRouteKind, opts.ControllerName, b.with("HTTPRouteStatuses"))
		for kind := range byKind {
			byKind[kind] = out.Routes
		}
	} else {
		out.Routes = krt.JoinCollection(routes, b.with("Routes")...)
		out.HTTPRouteStatuses = routeStatuses(httpRoutes, HTTPRouteKind, opts.ControllerName, b.with("HTTPRouteStatuses"))
	}
	if c, ok := byKind[GRPCRouteKind]; ok {
		out.GRPCRouteStatuses = routeStatuses(c, GRPCRouteKind, opts.ControllerName, b.with("GRPCRouteStatuses"))
	}
	if c, ok := byKind[TLSRouteKind]; ok {
		out.TLSRouteStatuses = routeStatuses(c, TLSRouteKind, opts.ControllerName, b.with("TLSRouteStatuses"))
	}
	if c, ok := byKind[TCPRouteKind]; ok {
		out.TCPRouteStatuses = routeStatuses(c, TCPRouteKind, opts.ControllerName, b.with("TCPRouteStatuses"))
	}

	attachments := b.routeAttachmentCollection(out.Routes)
	out.GatewayStatuses = b.gatewayStatusCollection(attachments)
	out.Models = b.modelsCollection(out.Routes)
	if in.ListenerSets != nil {
		out.ListenerSetStatuses = b.listenerSetStatusCollection(attachments)
	}

	if in.ExternalProcessors != nil {
		out.ExternalProcessorStatuses = b.processorStatusCollection()
	}

	if b.tls.policies != nil {
		out.BackendTLSPolicyStatuses = backendTLSPolicyStatuses(in.BackendTLSPolicies, b.tls, out.Routes, in.Services, opts.ControllerName,
			b.with("BackendTLSPolicyStatuses"))
	}

	if b.pools == nil {
		return out
	}
	out.GatewayParents = b.gatewayParentsCollection(out.Routes)
	out.InferencePools = b.inferencePoolCollection(out.GatewayParents)
	out.PoolStatuses, out.ShadowServices = b.poolStatusCollections(out.InferencePools)
	return out
}

// builder is what Build's collection builders share: the inputs, the
// options, and the collections built before them that later ones read.
type builder struct {
	in   Inputs
	opts Options
	// pools is in.InferencePools, nil when the inference extension is off.
	pools krt.Collection[*inferencev1.InferencePool]
	// gateways is Outputs.Gateways, once built.
	gateways krt.Collection[GatewayView]
	// tls resolves every upstream's client TLS (backendtls.go).
	tls upstreamTLS
}

// with are the options of the collection named name: Options.Krt and its
// debug name.
func (b *builder) with(name string) []krt.CollectionOption {
	return append(slices.Clone(b.opts.Krt), krt.WithName("gateway/"+name))
}
