// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/upstreamtls"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/writer"
)

// Inputs are the collections the controller reads. In a cluster they are
// kube.Client's informer collections; in file mode, static collections of
// the manifests. InferencePools is nil when the inference extension is off
// (no InferencePool informer is started); GRPCRoutes may be nil when the
// GRPCRoute CRD is not served.
type Inputs struct {
	GatewayClasses  krt.Collection[*gwv1.GatewayClass]
	Gateways        krt.Collection[*gwv1.Gateway]
	HTTPRoutes      krt.Collection[*gwv1.HTTPRoute]
	GRPCRoutes      krt.Collection[*gwv1.GRPCRoute]
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
	// Krt are options for every collection built (stop channel, debug
	// handler).
	Krt []krt.CollectionOption
	// Logger, when set, gets a warning, with the object's key, each time a
	// BackendTLSPolicy or DestinationRule resolves to TLS that cannot be
	// honoured or a setting that is not applied; nil logs nothing (status
	// -f and check -f print these problems themselves).
	Logger *slog.Logger
}

// Types of the desired state the writers consume.
type (
	// RouteStatus is our status.parents entries of one route.
	RouteStatus = writer.DesiredStatus[gwv1.RouteParentStatus]
	// PoolStatus is our status.parents entries of one InferencePool.
	PoolStatus = writer.DesiredStatus[inferencev1.ParentStatus]
	// ShadowServiceApply is one desired shadow Service.
	ShadowServiceApply = writer.Desired[*corev1ac.ServiceApplyConfiguration]
)

// Outputs are the controller's derived collections. The pool collections are
// nil when the inference extension is off; GRPCRouteStatus is nil without
// Inputs.GRPCRoutes.
type Outputs struct {
	// ClassStatuses is the Accepted condition of each of our GatewayClasses.
	ClassStatuses krt.Collection[ClassStatus]
	// Gateways is our validated view of each Gateway of our classes.
	Gateways krt.Collection[GatewayView]
	// GatewayStatuses is the status of each of our Gateways.
	GatewayStatuses krt.Collection[GatewayStatusResult]
	// Routes is every HTTPRoute and GRPCRoute that names a Gateway of ours,
	// attached and with its backends resolved.
	Routes krt.Collection[RouteResult]
	// HTTPRouteStatuses and GRPCRouteStatuses are our entries of each
	// route's status.parents.
	HTTPRouteStatuses krt.Collection[RouteStatus]
	GRPCRouteStatuses krt.Collection[RouteStatus]
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
	// Translator is, per Gateway of ours, what the xDS translator needs.
	Translator krt.Collection[model.Gateway]
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
}

// ListenerSetStatusResult is the status of one ListenerSet of one of our
// Gateways (Gateway).
type ListenerSetStatusResult struct {
	Namespace, Name string
	Gateway         types.NamespacedName
	Status          gwv1.ListenerSetStatus
}

// ResourceName is namespace/name.
func (l ListenerSetStatusResult) ResourceName() string { return l.Namespace + "/" + l.Name }

// BackendTLSPolicyStatus is our status.ancestors entries of one
// BackendTLSPolicy.
type BackendTLSPolicyStatus = writer.DesiredStatus[gwv1.PolicyAncestorStatus]

// ResourceName is the krt key of a GatewayView: namespace/name.
func (g GatewayView) ResourceName() string { return g.Gateway.String() }

// ClassStatus is the Accepted condition of one of our GatewayClasses (its
// lastTransitionTime is left zero: the writer sets it).
type ClassStatus struct {
	Name      string
	Condition metav1.Condition
}

// ResourceName is the class name (GatewayClasses are cluster-scoped).
func (c ClassStatus) ResourceName() string { return c.Name }

// GatewayStatusResult is the status of one of our Gateways.
type GatewayStatusResult struct {
	Namespace, Name string
	Status          gwv1.GatewayStatus
}

// ResourceName is namespace/name.
func (g GatewayStatusResult) ResourceName() string { return g.Namespace + "/" + g.Name }

// RouteResult is one route that names a Gateway of ours as a parent:
// its attachment per parentRef and its rules' backendRefs resolved.
type RouteResult struct {
	Route      Route
	Generation int64
	Created    time.Time
	// Parents are the attachment results, one per parentRef that names a
	// Gateway of ours (AttachRoute).
	Parents []ParentResult
	Rules   []RuleResult
	// Pools are the InferencePools this route references with a permitted
	// reference (same namespace, or allowed by a ReferenceGrant), whether
	// or not the pool exists; sorted. Empty when the inference extension is
	// off.
	Pools []types.NamespacedName
}

// RuleResult is one route rule with its backendRefs resolved.
type RuleResult struct {
	// HTTP or GRPC is the rule as the translator gets it: as written, less
	// RequestMirror filters whose backendRef did not resolve.
	HTTP     *gwv1.HTTPRouteRule
	GRPC     *gwv1.GRPCRouteRule
	Backends []ResolvedBackend
	// MirrorErrors are the RequestMirror backendRefs that did not resolve;
	// they count in the route's ResolvedRefs condition. Mirrors are those
	// that did (their Service's client TLS reaches the model).
	MirrorErrors []ResolvedBackend
	Mirrors      []ResolvedBackend
	// ExternalAuth are the rule's ExternalAuth filters, resolved
	// (externalauth.go); AuthErrors are those that did not resolve, and
	// ExternalAuth filters in backendRefs' filters. AuthErrors count in the
	// route's ResolvedRefs condition.
	ExternalAuth []*model.ExternalAuth
	AuthErrors   []ResolvedBackend
	// Filters are the backendRefs' own filters, per backend.
	HTTPFilters [][]gwv1.HTTPRouteFilter
	GRPCFilters [][]gwv1.GRPCRouteFilter
	// Problem is why the rule cannot be served ("" when it can): what
	// core.CheckRoute found, "rule N: field: message". Such a rule is left
	// out of the translator's view (modelRoute) and reported in the route's
	// status (RouteParentStatuses) and in an Event (routeProblemEvents).
	Problem string
}

// ResourceName is kind/namespace/name.
func (r RouteResult) ResourceName() string {
	return r.Route.Kind + "/" + r.Route.Namespace + "/" + r.Route.Name
}

// GatewayParents is one pool's gatewayParents: our Gateways that a route
// referencing the pool names as a parent, each with those routes'
// attachment results. Parents is never empty.
type GatewayParents struct {
	Pool    types.NamespacedName
	Parents []PoolParent
}

// ResourceName is the pool's namespace/name.
func (g GatewayParents) ResourceName() string { return g.Pool.String() }

// InferencePoolObject is a pool with at least one gatewayParent: the pool,
// its parents, its Endpoint Picker Service (nil when endpointPickerRef is
// unset or names no Service that exists) and that Service port's client
// TLS as the parents' Gateways would use it.
type InferencePoolObject struct {
	Pool    *inferencev1.InferencePool
	Parents []PoolParent
	EPP     *corev1.Service
	EPPTLS  upstreamtls.Result
}

// ResourceName is the pool's namespace/name.
func (p InferencePoolObject) ResourceName() string { return p.Pool.Namespace + "/" + p.Pool.Name }

// routeAttachment is a route's attachment results alone: what a Gateway's and
// a ListenerSet's attachedRoutes counts read. A route change that leaves
// them equal (a rule or backend edit) recomputes no Gateway status.
type routeAttachment struct {
	Key     string // RouteResult.ResourceName
	Parents []ParentResult
}

func (r routeAttachment) ResourceName() string { return r.Key }

// routeModel is a route's attachment results and its translator view,
// built once per change of its RouteResult (modelRoute). The Translator
// collection assembles a Gateway's model.Gateway from these, so after one
// route changes, every other route of the Gateway keeps its *model.Route:
// krt's comparison of the old and new model.Gateway (Gateway.Equals) and the
// core Translator's route diff both stop at an unchanged pointer instead of
// looking inside every route (architecture/log/xds.md, "Route writes
// through the cluster").
type routeModel struct {
	Key     string // RouteResult.ResourceName
	Parents []ParentResult
	Route   *model.Route
}

func (r routeModel) ResourceName() string { return r.Key }

func newRouteModel(r *RouteResult) routeModel {
	return routeModel{Key: r.ResourceName(), Parents: r.Parents, Route: modelRoute(r)}
}

// gatewaysOf are the Gateways parents name, each once.
func gatewaysOf(parents []ParentResult) []types.NamespacedName {
	var keys []types.NamespacedName
	for _, p := range parents {
		if !slices.Contains(keys, p.Gateway) {
			keys = append(keys, p.Gateway)
		}
	}
	return keys
}

// Build derives every collection of the controller from in. The shape, from
// inputs to outputs:
//
//	GatewayClasses ─► ClassStatuses
//	Gateways (+classes, ListenerSets by parent) ─► Gateways ─► GatewayStatuses,
//	  ListenerSetStatuses, Translator
//	HTTPRoutes, GRPCRoutes (+Gateways, ListenerSets, Namespaces, Services,
//	  InferencePools, ReferenceGrants) ─► Routes ─► HTTPRouteStatuses,
//	  GRPCRouteStatuses
//	Routes ─► route attachments (by Gateway, ListenerSet) ─► GatewayStatuses,
//	  ListenerSetStatuses
//	Routes ─► route models (by Gateway) ─► Translator
//	Routes indexed by pool ─► GatewayParents ─► InferencePools (+pool, EPP
//	  Service) ─► PoolStatuses and ShadowServices (one derivation)
//
// Every transformation is pure and reads its inputs through krt.Fetch, so a
// change recomputes only what read it.
func Build(in Inputs, opts Options) Outputs {
	var out Outputs
	pools := in.InferencePools
	if !opts.InferenceEnabled {
		pools = nil
	}
	with := func(name string) []krt.CollectionOption {
		return append(slices.Clone(opts.Krt), krt.WithName("gateway/"+name))
	}

	classParams := krt.NewCollection(in.GatewayClasses, func(ctx krt.HandlerContext, gc *gwv1.GatewayClass) *ClassParams {
		if !IsOurGatewayClass(gc, opts.ControllerName) {
			return nil
		}
		p := ResolveClassParams(gc, func(ns, name string) *corev1.ConfigMap {
			if in.ConfigMaps == nil {
				return nil
			}
			if cm := krt.FetchOne(ctx, in.ConfigMaps, krt.FilterKey(ns+"/"+name)); cm != nil {
				return *cm
			}
			return nil
		})
		return &p
	}, with("ClassParams")...)

	out.ClassStatuses = krt.NewCollection(in.GatewayClasses, func(ctx krt.HandlerContext, gc *gwv1.GatewayClass) *ClassStatus {
		p := krt.FetchOne(ctx, classParams, krt.FilterKey(gc.Name))
		if p == nil {
			return nil
		}
		return &ClassStatus{Name: gc.Name, Condition: GatewayClassAcceptedCondition(gc, p.Problem, metav1.Time{})}
	}, with("ClassStatuses")...)

	var setsByGateway krt.Index[types.NamespacedName, *gwv1.ListenerSet]
	if in.ListenerSets != nil {
		setsByGateway = krt.NewIndex(in.ListenerSets, "listenersets-by-gateway", func(ls *gwv1.ListenerSet) []types.NamespacedName {
			if key, ok := ListenerSetParent(ls); ok {
				return []types.NamespacedName{key}
			}
			return nil
		})
	}

	tlsSources := buildUpstreamTLS(in, opts, with)
	out.BackendTLSPolicies = tlsSources.policies
	backendOpts := BackendOptions{InferenceEnabled: opts.InferenceEnabled, ClusterDomain: opts.ClusterDomain}
	// serviceLookups are the Service, ReferenceGrant and upstream TLS
	// lookups of objects used by the Gateways of gatewayNamespaces.
	serviceLookups := func(ctx krt.HandlerContext, gatewayNamespaces func() []string) BackendLookups {
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
			UpstreamTLS: tlsSources.lookup(ctx, gatewayNamespaces),
		}
	}

	out.Gateways = krt.NewCollection(in.Gateways, func(ctx krt.HandlerContext, gw *gwv1.Gateway) *GatewayView {
		p := krt.FetchOne(ctx, classParams, krt.FilterKey(string(gw.Spec.GatewayClassName)))
		if p == nil {
			return nil
		}
		certs := CertificateLookups{
			Secret: func(key types.NamespacedName) *corev1.Secret {
				if in.Secrets == nil {
					return nil
				}
				if sec := krt.FetchOne(ctx, in.Secrets, krt.FilterKey(key.String())); sec != nil {
					return *sec
				}
				return nil
			},
			ReferenceGrants: func(ns string) []*gwv1.ReferenceGrant {
				return krt.Fetch(ctx, in.ReferenceGrants, krt.FilterNamespace(ns))
			},
			ConfigMap: func(key types.NamespacedName) *corev1.ConfigMap {
				if in.ConfigMaps == nil {
					return nil
				}
				if cm := krt.FetchOne(ctx, in.ConfigMaps, krt.FilterKey(key.String())); cm != nil {
					return *cm
				}
				return nil
			},
			Filters: &ListenerFilterLookups{
				ExternalProcessor: func(key types.NamespacedName) *imv1alpha1.ExternalProcessor {
					if in.ExternalProcessors == nil {
						return nil
					}
					if ep := krt.FetchOne(ctx, in.ExternalProcessors, krt.FilterKey(key.String())); ep != nil {
						return *ep
					}
					return nil
				},
				// A processor's client TLS is read as the Gateway's
				// (a DestinationRule's credentialName in its namespace).
				Backends: serviceLookups(ctx, func() []string { return []string{gw.Namespace} }),
				Options:  backendOpts,
			},
		}
		v := NewGatewayView(gw, certs)
		v.Class, v.EPPBodyMode, v.ClassProblem = p.Class, p.EPPBodyMode, p.Problem
		v.ParametersProblem = gatewayParametersProblem(gw)
		v.AddressProblem = gatewayAddressProblem(gw)
		if setsByGateway != nil {
			if sets := setsByGateway.Fetch(ctx, v.Gateway); len(sets) > 0 {
				v.AddListenerSets(gw, sets, certs, func(name string) map[string]string {
					if ns := krt.FetchOne(ctx, in.Namespaces, krt.FilterKey(name)); ns != nil {
						return (*ns).Labels
					}
					return nil
				})
			}
		}
		return v
	}, with("Gateways")...)

	// sets resolves a route's ListenerSet parentRef to the ListenerSet's
	// Gateway; nil without ListenerSets.
	sets := func(ctx krt.HandlerContext) ListenerSetLookup {
		if in.ListenerSets == nil {
			return nil
		}
		return func(key types.NamespacedName) (types.NamespacedName, bool) {
			ls := krt.FetchOne(ctx, in.ListenerSets, krt.FilterKey(key.String()))
			if ls == nil {
				return types.NamespacedName{}, false
			}
			return ListenerSetParent(*ls)
		}
	}

	lookups := func(ctx krt.HandlerContext, gatewayNamespaces func() []string) (GatewayLookup, NamespaceLabels, BackendLookups) {
		gateways := func(key types.NamespacedName) *GatewayView {
			return krt.FetchOne(ctx, out.Gateways, krt.FilterKey(key.String()))
		}
		nsLabels := func(name string) map[string]string {
			if ns := krt.FetchOne(ctx, in.Namespaces, krt.FilterKey(name)); ns != nil {
				return (*ns).Labels
			}
			return nil
		}
		backends := serviceLookups(ctx, gatewayNamespaces)
		if pools != nil {
			backends.Pool = func(key types.NamespacedName) *inferencev1.InferencePool {
				if p := krt.FetchOne(ctx, pools, krt.FilterKey(key.String())); p != nil {
					return *p
				}
				return nil
			}
		}
		return gateways, nsLabels, backends
	}
	// resolve attaches route and resolves the backendRefs of its rules
	// (refs(i) are rule i's); nil when it names no Gateway of ours.
	resolve := func(ctx krt.HandlerContext, route Route, meta *metav1.ObjectMeta, rules []RuleResult,
		refs func(i int) []gwv1.BackendRef,
	) *RouteResult {
		var parents []ParentResult
		// A DestinationRule's credentialName CA is read in the namespace
		// of each Gateway that will use it: the parents'.
		gateways, nsLabels, lk := lookups(ctx, func() []string { return gatewayNamespaces(parents) })
		parents = AttachRouteWithListenerSets(route, gateways, sets(ctx), nsLabels)
		if len(parents) == 0 {
			return nil
		}
		res := &RouteResult{Route: route, Generation: meta.Generation, Created: meta.CreationTimestamp.Time,
			Parents: parents, Rules: rules}
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
		checkRules(res, core.Options{InferenceEnabled: opts.InferenceEnabled, ClusterDomain: opts.ClusterDomain})
		res.Pools = referencedPools(res.Rules)
		return res
	}

	httpRoutes := krt.NewCollection(in.HTTPRoutes, func(ctx krt.HandlerContext, r *gwv1.HTTPRoute) *RouteResult {
		route := Route{Kind: HTTPRouteKind, Namespace: r.Namespace, Name: r.Name, Hostnames: r.Spec.Hostnames, ParentRefs: r.Spec.ParentRefs}
		rules := make([]RuleResult, len(r.Spec.Rules))
		for i := range r.Spec.Rules {
			rules[i].HTTP = &r.Spec.Rules[i]
			for _, b := range r.Spec.Rules[i].BackendRefs {
				rules[i].HTTPFilters = append(rules[i].HTTPFilters, b.Filters)
			}
		}
		return resolve(ctx, route, &r.ObjectMeta, rules, func(i int) []gwv1.BackendRef {
			refs := make([]gwv1.BackendRef, len(r.Spec.Rules[i].BackendRefs))
			for j, b := range r.Spec.Rules[i].BackendRefs {
				refs[j] = b.BackendRef
			}
			return refs
		})
	}, with("HTTPRoutes")...)
	routes := []krt.Collection[RouteResult]{httpRoutes}

	if in.GRPCRoutes != nil {
		grpcRoutes := krt.NewCollection(in.GRPCRoutes, func(ctx krt.HandlerContext, r *gwv1.GRPCRoute) *RouteResult {
			route := Route{Kind: GRPCRouteKind, Namespace: r.Namespace, Name: r.Name, Hostnames: r.Spec.Hostnames, ParentRefs: r.Spec.ParentRefs}
			rules := make([]RuleResult, len(r.Spec.Rules))
			for i := range r.Spec.Rules {
				rules[i].GRPC = &r.Spec.Rules[i]
				for _, b := range r.Spec.Rules[i].BackendRefs {
					rules[i].GRPCFilters = append(rules[i].GRPCFilters, b.Filters)
				}
			}
			return resolve(ctx, route, &r.ObjectMeta, rules, func(i int) []gwv1.BackendRef {
				refs := make([]gwv1.BackendRef, len(r.Spec.Rules[i].BackendRefs))
				for j, b := range r.Spec.Rules[i].BackendRefs {
					refs[j] = b.BackendRef
				}
				return refs
			})
		}, with("GRPCRoutes")...)
		routes = append(routes, grpcRoutes)
		out.GRPCRouteStatuses = routeStatuses(grpcRoutes, opts.ControllerName, with("GRPCRouteStatuses"))
	}
	out.HTTPRouteStatuses = routeStatuses(httpRoutes, opts.ControllerName, with("HTTPRouteStatuses"))
	out.Routes = krt.JoinCollection(routes, with("Routes")...)

	attachments := krt.NewCollection(out.Routes, func(ctx krt.HandlerContext, r RouteResult) *routeAttachment {
		return &routeAttachment{Key: r.ResourceName(), Parents: r.Parents}
	}, with("RouteAttachments")...)
	attachmentsByGateway := krt.NewIndex(attachments, "attachments-by-gateway", func(r routeAttachment) []types.NamespacedName {
		return gatewaysOf(r.Parents)
	})
	models := krt.NewCollection(out.Routes, func(ctx krt.HandlerContext, r RouteResult) *routeModel {
		m := newRouteModel(&r)
		return &m
	}, with("RouteModels")...)
	modelsByGateway := krt.NewIndex(models, "route-models-by-gateway", func(r routeModel) []types.NamespacedName {
		return gatewaysOf(r.Parents)
	})

	out.GatewayStatuses = krt.NewCollection(out.Gateways, func(ctx krt.HandlerContext, gw GatewayView) *GatewayStatusResult {
		routes := attachmentsByGateway.Fetch(ctx, gw.Gateway)
		results := make([][]ParentResult, 0, len(routes))
		for _, r := range routes {
			results = append(results, r.Parents)
		}
		attached := AttachedRoutes(results)[gw.Gateway]
		// Programmed stays False/Pending here: nothing here knows whether a
		// proxy serves the Gateway (DeployedGatewayStatuses adds it).
		st := GatewayStatus(&gw, attached, false, metav1.Time{})
		withGatewayTakeovers(&st, ListenerTakeovers(gw.Gateway, results)[types.NamespacedName{}], gw.Generation)
		if len(gw.ListenerSets) > 0 {
			st.AttachedListenerSets = ptr.To(gw.AttachedListenerSets())
		}
		switch {
		case gw.ClassProblem != "":
			st = withClassProblem(st, gw.Class, gw.ClassProblem)
		case gw.ParametersProblem != "":
			st = withInvalidParameters(st, gw.ParametersProblem)
		case gw.AddressProblem != "":
			st = withNotAccepted(st, gwv1.GatewayReasonUnsupportedAddress, gw.AddressProblem)
		}
		return &GatewayStatusResult{Namespace: gw.Gateway.Namespace, Name: gw.Gateway.Name, Status: st}
	}, with("GatewayStatuses")...)

	out.Translator = krt.NewCollection(out.Gateways, func(ctx krt.HandlerContext, gw GatewayView) *model.Gateway {
		return translatorGateway(gw, modelsByGateway.Fetch(ctx, gw.Gateway))
	}, with("Translator")...)

	if in.ListenerSets != nil {
		routesBySet := krt.NewIndex(attachments, "attachments-by-listenerset", func(r routeAttachment) []types.NamespacedName {
			var keys []types.NamespacedName
			for _, p := range r.Parents {
				if p.ListenerSet.Name != "" && !slices.Contains(keys, p.ListenerSet) {
					keys = append(keys, p.ListenerSet)
				}
			}
			return keys
		})
		// takenBySet indexes the routes whose hostnames a ListenerSet's
		// listener takes (ParentResult.Taken): they are attached elsewhere.
		takenBySet := krt.NewIndex(attachments, "attachments-by-taking-listenerset", func(r routeAttachment) []types.NamespacedName {
			var keys []types.NamespacedName
			for _, p := range r.Parents {
				for _, t := range p.Taken {
					if t.BySet.Name != "" && !slices.Contains(keys, t.BySet) {
						keys = append(keys, t.BySet)
					}
				}
			}
			return keys
		})
		out.ListenerSetStatuses = krt.NewCollection(in.ListenerSets, func(ctx krt.HandlerContext, ls *gwv1.ListenerSet) *ListenerSetStatusResult {
			parent, ok := ListenerSetParent(ls)
			if !ok {
				return nil
			}
			gw := krt.FetchOne(ctx, out.Gateways, krt.FilterKey(parent.String()))
			if gw == nil {
				return nil // not a Gateway of ours: not ours to report on
			}
			key := types.NamespacedName{Namespace: ls.Namespace, Name: ls.Name}
			view := gw.ListenerSet(key)
			if view == nil {
				return nil
			}
			routes := routesBySet.Fetch(ctx, key)
			results := make([][]ParentResult, 0, len(routes))
			for _, r := range routes {
				results = append(results, r.Parents)
			}
			st := ListenerSetStatus(view, ListenerSetAttachedRoutes(results)[key])
			var taken [][]ParentResult
			for _, r := range takenBySet.Fetch(ctx, key) {
				taken = append(taken, r.Parents)
			}
			withListenerSetTakeovers(&st, ListenerTakeovers(parent, taken)[key], view.Generation)
			return &ListenerSetStatusResult{Namespace: ls.Namespace, Name: ls.Name, Gateway: parent, Status: st}
		}, with("ListenerSetStatuses")...)
	}

	if tlsSources.policies != nil {
		out.BackendTLSPolicyStatuses = backendTLSPolicyStatuses(in.BackendTLSPolicies, tlsSources, out.Routes, in.Services, opts.ControllerName,
			with("BackendTLSPolicyStatuses"))
	}

	if pools == nil {
		return out
	}

	routesByPool := krt.NewIndex(out.Routes, "routes-by-pool", func(r RouteResult) []types.NamespacedName { return r.Pools })

	out.GatewayParents = krt.NewCollection(pools, func(ctx krt.HandlerContext, pool *inferencev1.InferencePool) *GatewayParents {
		key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
		parents := PoolGatewayParents(key, routesByPool.Fetch(ctx, key))
		if len(parents) == 0 {
			return nil
		}
		return &GatewayParents{Pool: key, Parents: parents}
	}, with("GatewayParents")...)

	out.InferencePools = krt.NewCollection(out.GatewayParents, func(ctx krt.HandlerContext, gp GatewayParents) *InferencePoolObject {
		pool := krt.FetchOne(ctx, pools, krt.FilterKey(gp.Pool.String()))
		if pool == nil {
			return nil
		}
		obj := &InferencePoolObject{Pool: *pool, Parents: gp.Parents}
		if ref := (*pool).Spec.EndpointPickerRef; ref != nil && ref.Name != "" {
			if svc := krt.FetchOne(ctx, in.Services, krt.FilterKey(gp.Pool.Namespace+"/"+string(ref.Name))); svc != nil {
				obj.EPP = *svc
				namespaces := func() []string {
					var out []string
					for _, p := range gp.Parents {
						if !slices.Contains(out, p.Gateway.Namespace) {
							out = append(out, p.Gateway.Namespace)
						}
					}
					return out
				}
				if resolve := tlsSources.lookup(ctx, namespaces); resolve != nil && eppRefProblem(*pool, obj.EPP) == "" {
					obj.EPPTLS = resolve(servicePort(obj.EPP, int32(ref.Port.Number), serviceFQDN(obj.EPP.Name, obj.EPP.Namespace, opts.ClusterDomain)))
				}
			}
		}
		return obj
	}, with("InferencePools")...)

	statuses, shadows := krt.NewStatusCollection(out.InferencePools,
		func(ctx krt.HandlerContext, p InferencePoolObject) (*PoolStatus, *ShadowServiceApply) {
			st := &PoolStatus{Namespace: p.Pool.Namespace, Name: p.Pool.Name,
				Parents: PoolParentStatuses(p.Pool, p.Parents, p.EPP, p.EPPTLS, opts.ControllerName, metav1.Time{})}
			if !PoolAccepted(st.Parents) {
				return st, nil
			}
			svc := &ShadowServiceApply{Namespace: p.Pool.Namespace, Name: ShadowServiceName(p.Pool.Name), Apply: ShadowService(p.Pool)}
			return st, svc
		}, with("ShadowServices")...)
	out.ShadowServices = shadows
	out.PoolStatuses = krt.NewCollection(statuses, func(ctx krt.HandlerContext, s krt.ObjectWithStatus[InferencePoolObject, PoolStatus]) *PoolStatus {
		return &s.Status
	}, with("PoolStatuses")...)
	return out
}

// TranslatorGateway builds the xDS translator's view of gw (model.Gateway)
// from the routes that name it: each served listener (ListenerView.Served;
// an HTTPS one with its Secret), the Gateway's own and then those of its
// accepted ListenerSets in precedence order (named ListenerSetListenerName),
// with the routes attached to it, sorted by kind, namespace and name.
func TranslatorGateway(gw GatewayView, routes []RouteResult) *model.Gateway {
	models := make([]routeModel, len(routes))
	for i := range routes {
		models[i] = newRouteModel(&routes[i])
	}
	return translatorGateway(gw, models)
}

// translatorGateway is TranslatorGateway over the routes' models
// (routeModel), which it may reorder.
func translatorGateway(gw GatewayView, routes []routeModel) *model.Gateway {
	// Fetch gives them in key order ("kind/namespace/name"), which is not
	// the model's (model.CompareRoutes) when one namespace is another's
	// prefix followed by a character below '/', such as "team-a" and
	// "team"; the core Translator, finding the routes out of order,
	// would translate the Gateway from scratch on every change.
	byModelOrder := func(a, b routeModel) int { return model.CompareRoutes(a.Route, b.Route) }
	if !slices.IsSortedFunc(routes, byModelOrder) {
		slices.SortFunc(routes, byModelOrder)
	}
	out := &model.Gateway{Namespace: gw.Gateway.Namespace, Name: gw.Gateway.Name,
		EPPBodyMode: gw.EPPBodyMode, ClassParametersError: gw.ClassProblem}
	if gw.BackendClientCert.Name != "" {
		out.BackendClientCertificate = gw.BackendClientCert.String()
	}
	if out.ClassParametersError == "" && gw.ParametersProblem != "" {
		out.ClassParametersError = gw.ParametersProblem
	}
	if out.ClassParametersError == "" && gw.AddressProblem != "" {
		out.ClassParametersError = gw.AddressProblem
	}
	listeners := slices.Clone(gw.Listeners)
	for _, ls := range gw.ListenerSets {
		if ls.Accepted() {
			listeners = append(listeners, ls.Listeners...)
		}
	}
	for _, l := range listeners {
		if !l.Served() {
			continue
		}
		name := string(l.Name)
		if l.Set.Name != "" {
			name = ListenerSetListenerName(l.Set, l.Name)
		}
		ml := model.Listener{Name: name, Port: uint32(l.Port), Protocol: l.Protocol, Hostname: l.Hostname,
			Filters: l.Filters, FilterError: l.FilterError}
		if l.Certificate.Name != "" {
			ml.TLS = &model.ListenerTLS{CertificateRefs: []string{l.Certificate.String()}, ClientValidation: l.ClientValidation}
		}
		for i := range routes {
			if attachedTo(routes[i].Parents, gw.Gateway, l.Set, l.Name) {
				ml.Routes = append(ml.Routes, routes[i].Route)
			}
		}
		out.Listeners = append(out.Listeners, ml)
	}
	return out
}

func attachedTo(parents []ParentResult, gw, set types.NamespacedName, listener gwv1.SectionName) bool {
	for _, p := range parents {
		if p.Accepted && p.Gateway == gw && p.ListenerSet == set && slices.Contains(p.Listeners, listener) {
			return true
		}
	}
	return false
}

func modelRoute(r *RouteResult) *model.Route {
	mr := &model.Route{Kind: r.Route.Kind, Namespace: r.Route.Namespace, Name: r.Route.Name, CreationTimestamp: r.Created}
	for _, h := range r.Route.Hostnames {
		mr.Hostnames = append(mr.Hostnames, string(h))
	}
	for i, rule := range r.Rules {
		if rule.Problem != "" {
			continue // left out; RouteParentStatuses says why
		}
		rr := model.Rule{Index: i, HTTP: rule.HTTP, GRPC: rule.GRPC, ExternalAuth: rule.ExternalAuth}
		for _, m := range rule.Mirrors {
			if m.Service == nil {
				continue
			}
			if rr.Mirrors == nil {
				rr.Mirrors = map[string]*model.ServiceBackend{}
			}
			rr.Mirrors[core.ClusterName(uint32(m.Service.Port), m.Service.Host)] = m.Service
		}
		for j, b := range rule.Backends {
			mb := model.Backend{Weight: b.Weight, Service: b.Service, Pool: b.Pool}
			if !b.ResolvedRefs {
				mb.Invalid = b.Message
			}
			if j < len(rule.HTTPFilters) {
				mb.HTTPFilters = rule.HTTPFilters[j]
			}
			if j < len(rule.GRPCFilters) {
				mb.GRPCFilters = rule.GRPCFilters[j]
			}
			rr.Backends = append(rr.Backends, mb)
		}
		mr.Rules = append(mr.Rules, rr)
	}
	return mr
}
