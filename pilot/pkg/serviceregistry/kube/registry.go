// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Inputs are the collections the registry reads: kube.Client's informer
// collections in a cluster, static collections in tests and file mode.
type Inputs struct {
	// Services and EndpointSlices are required.
	Services       krt.Collection[*corev1.Service]
	EndpointSlices krt.Collection[*discoveryv1.EndpointSlice]
}

// Options are the registry's settings.
type Options struct {
	// ClusterDomain is the DNS suffix of Service hosts, e.g. cluster.local.
	ClusterDomain string
	// Krt are options for every collection built (stop channel, debug
	// handler); each collection also gets its own name.
	Krt []krt.CollectionOption
}

// Outputs are the registry's derived collections.
type Outputs struct {
	// Endpoints has one entry per port of every Service that is not of type
	// ExternalName, keyed by cluster name.
	Endpoints krt.Collection[model.ClusterEndpoints]
}

// Build derives the registry's collections from in:
//
//	EndpointSlices indexed by kubernetes.io/service-name ─┐
//	Services ─────────────────────────────────────────────┴─► Endpoints
//
// Each Service is one transformation input, so an EndpointSlice change
// recomputes only the Service it belongs to. Build panics when a required
// input is nil.
func Build(in Inputs, opts Options) Outputs {
	if in.Services == nil || in.EndpointSlices == nil {
		panic("serviceregistry/kube.Build: Inputs.Services and Inputs.EndpointSlices are required")
	}
	with := func(name string) []krt.CollectionOption {
		return append(slices.Clone(opts.Krt), krt.WithName("serviceregistry/"+name))
	}
	var out Outputs
	bySvc := krt.NewIndex(in.EndpointSlices, "endpointslices-by-service", SliceServiceKeys)
	out.Endpoints = krt.NewManyCollection(in.Services, EndpointsBuilder(bySvc, opts.ClusterDomain), with("Endpoints")...)
	return out
}

// ServiceHost is a Service's FQDN: <name>.<namespace>.svc.<clusterDomain>.
func ServiceHost(name, namespace, clusterDomain string) string {
	return name + "." + namespace + ".svc." + clusterDomain
}
