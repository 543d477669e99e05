// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// serviceIndexName names the index of given slices by owning Service.
const serviceIndexName = "endpointslice.serviceName"

// Collection returns slices joined with computed ones: for every Service that
// has a selector and no EndpointSlice among slices (one labelled
// kubernetes.io/service-name=<its name> in its namespace, whoever manages it),
// ForService's result over pods. The given slices win a name conflict with a
// computed one (krt.JoinCollection lists them first).
//
// Dependencies are tracked per Service: a Service is recomputed when it
// changes, when a slice labelled with its name appears or goes away, and
// (only while it has no slice of its own) when a Pod in its namespace that
// its selector matches, before or after the change, changes. Computed slices
// of a Service that gains a slice of its own are withdrawn.
//
// opts (stop channel, debug handler) apply to both collections built here:
// the computed slices, always named "ComputedEndpointSlices", and the join,
// named "EndpointSlices" unless opts name it.
func Collection(services krt.Collection[*corev1.Service], pods krt.Collection[*corev1.Pod],
	slices krt.Collection[*discoveryv1.EndpointSlice], opts ...krt.CollectionOption,
) krt.Collection[*discoveryv1.EndpointSlice] {
	c := computed(services, pods, slices, opts...)
	return krt.JoinCollection([]krt.Collection[*discoveryv1.EndpointSlice]{slices, c},
		append([]krt.CollectionOption{krt.WithName("EndpointSlices")}, opts...)...)
}

// computed is the collection of slices computed for Services without slices
// of their own.
func computed(services krt.Collection[*corev1.Service], pods krt.Collection[*corev1.Pod],
	slices krt.Collection[*discoveryv1.EndpointSlice], opts ...krt.CollectionOption,
) krt.Collection[*discoveryv1.EndpointSlice] {
	byService := krt.NewIndex(slices, serviceIndexName, func(s *discoveryv1.EndpointSlice) []string {
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			return []string{s.Namespace + "/" + name}
		}
		return nil
	})
	o := append(append([]krt.CollectionOption{}, opts...), krt.WithName("ComputedEndpointSlices"))
	return krt.NewManyCollection(services, serviceSlices(pods, byService), o...)
}

// serviceSlices is the transformation of computed: a Service's slices, or
// none when it has no selector or slices of its own. It reads slices only
// through the index (keyed by namespace/service name) and Pods only through
// a namespace and label filter, so only changes that can affect a Service
// recompute it.
func serviceSlices(pods krt.Collection[*corev1.Pod], byService krt.Index[string, *discoveryv1.EndpointSlice],
) krt.TransformationMulti[*corev1.Service, *discoveryv1.EndpointSlice] {
	return func(ctx krt.HandlerContext, svc *corev1.Service) []*discoveryv1.EndpointSlice {
		if svc.Spec.Type == corev1.ServiceTypeExternalName || len(svc.Spec.Selector) == 0 {
			return nil
		}
		if len(byService.Fetch(ctx, svc.Namespace+"/"+svc.Name)) > 0 {
			return nil
		}
		selected := krt.Fetch(ctx, pods, krt.FilterNamespace(svc.Namespace), krt.FilterLabel(svc.Spec.Selector))
		return ForService(svc, selected)
	}
}
