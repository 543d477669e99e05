// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/upstreamtls"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube/writer"
)

// The result types of the controller's collections (Outputs, and the
// per-route collections between Routes and the per-Gateway ones), each
// with its krt key (ResourceName).

// Types of the desired state the writers consume.
type (
	// RouteStatus is our status.parents entries of one route.
	RouteStatus = writer.DesiredStatus[gwv1.RouteParentStatus]
	// PoolStatus is our status.parents entries of one InferencePool.
	PoolStatus = writer.DesiredStatus[inferencev1.ParentStatus]
	// ShadowServiceApply is one desired shadow Service.
	ShadowServiceApply = writer.Desired[*corev1ac.ServiceApplyConfiguration]
)

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
	// RequestMirror filters whose backendRef did not resolve. TLS or TCP
	// is a TLSRoute's or TCPRoute's rule, as written.
	HTTP     *gwv1.HTTPRouteRule
	GRPC     *gwv1.GRPCRouteRule
	TLS      *gwv1.TLSRouteRule
	TCP      *gwv1.TCPRouteRule
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
