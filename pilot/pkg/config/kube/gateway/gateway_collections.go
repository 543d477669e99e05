// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// classParamsCollection resolves the parameters (classparams.go) of each
// GatewayClass of ours.
func (b *builder) classParamsCollection() krt.Collection[ClassParams] {
	return krt.NewCollection(b.in.GatewayClasses, func(ctx krt.HandlerContext, gc *gwv1.GatewayClass) *ClassParams {
		if !IsOurGatewayClass(gc, b.opts.ControllerName) {
			return nil
		}
		p := ResolveClassParams(gc, func(ns, name string) *corev1.ConfigMap {
			if b.in.ConfigMaps == nil {
				return nil
			}
			if cm := krt.FetchOne(ctx, b.in.ConfigMaps, krt.FilterKey(ns+"/"+name)); cm != nil {
				return *cm
			}
			return nil
		})
		return &p
	}, b.with("ClassParams")...)
}

// classStatusCollection is Outputs.ClassStatuses: the Accepted condition of
// each GatewayClass of ours.
func (b *builder) classStatusCollection(classParams krt.Collection[ClassParams]) krt.Collection[ClassStatus] {
	return krt.NewCollection(b.in.GatewayClasses, func(ctx krt.HandlerContext, gc *gwv1.GatewayClass) *ClassStatus {
		p := krt.FetchOne(ctx, classParams, krt.FilterKey(gc.Name))
		if p == nil {
			return nil
		}
		return &ClassStatus{Name: gc.Name, Condition: GatewayClassAcceptedCondition(gc, p.Problem, metav1.Time{})}
	}, b.with("ClassStatuses")...)
}

// gatewayCollection is Outputs.Gateways: each Gateway of our classes
// validated (GatewayView), with its certificates, class parameters,
// addresses and the ListenerSets that name it.
func (b *builder) gatewayCollection(classParams krt.Collection[ClassParams]) krt.Collection[GatewayView] {
	in := b.in
	var setsByGateway krt.Index[types.NamespacedName, *gwv1.ListenerSet]
	if in.ListenerSets != nil {
		setsByGateway = krt.NewIndex(in.ListenerSets, "listenersets-by-gateway", func(ls *gwv1.ListenerSet) []types.NamespacedName {
			if key, ok := ListenerSetParent(ls); ok {
				return []types.NamespacedName{key}
			}
			return nil
		})
	}

	return krt.NewCollection(in.Gateways, func(ctx krt.HandlerContext, gw *gwv1.Gateway) *GatewayView {
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
				Backends: b.serviceLookups(ctx, func() []string { return []string{gw.Namespace} }),
				Options:  BackendOptions{InferenceEnabled: b.opts.InferenceEnabled, ClusterDomain: b.opts.ClusterDomain},
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
	}, b.with("Gateways")...)
}

// gatewayStatusCollection is Outputs.GatewayStatuses: each Gateway's
// status, its attachedRoutes counted from the routes' attachments.
func (b *builder) gatewayStatusCollection(attachments krt.Collection[routeAttachment]) krt.Collection[GatewayStatusResult] {
	attachmentsByGateway := krt.NewIndex(attachments, "attachments-by-gateway", func(r routeAttachment) []types.NamespacedName {
		return gatewaysOf(r.Parents)
	})
	return krt.NewCollection(b.gateways, func(ctx krt.HandlerContext, gw GatewayView) *GatewayStatusResult {
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
	}, b.with("GatewayStatuses")...)
}

// modelsCollection is Outputs.Models: each Gateway's model.Gateway,
// assembled from its routes' models (routeModel, one per route change).
func (b *builder) modelsCollection(routes krt.Collection[RouteResult]) krt.Collection[model.Gateway] {
	models := krt.NewCollection(routes, func(ctx krt.HandlerContext, r RouteResult) *routeModel {
		m := newRouteModel(&r)
		return &m
	}, b.with("RouteModels")...)
	modelsByGateway := krt.NewIndex(models, "route-models-by-gateway", func(r routeModel) []types.NamespacedName {
		return gatewaysOf(r.Parents)
	})
	return krt.NewCollection(b.gateways, func(ctx krt.HandlerContext, gw GatewayView) *model.Gateway {
		return translatorGateway(gw, modelsByGateway.Fetch(ctx, gw.Gateway))
	}, b.with("Models")...)
}

// listenerSetStatusCollection is Outputs.ListenerSetStatuses: the status of
// each ListenerSet whose parent is a Gateway of ours, with the routes
// attached to it and the hostnames its listeners take from others.
func (b *builder) listenerSetStatusCollection(attachments krt.Collection[routeAttachment]) krt.Collection[ListenerSetStatusResult] {
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
	return krt.NewCollection(b.in.ListenerSets, func(ctx krt.HandlerContext, ls *gwv1.ListenerSet) *ListenerSetStatusResult {
		parent, ok := ListenerSetParent(ls)
		if !ok {
			return nil
		}
		gw := krt.FetchOne(ctx, b.gateways, krt.FilterKey(parent.String()))
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
	}, b.with("ListenerSetStatuses")...)
}
