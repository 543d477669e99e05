// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Inputs are the collections the registry reads: kube.Client's informer
// collections in a cluster, static collections in tests and file mode.
type Inputs struct {
	// Services and EndpointSlices are required.
	Services       krt.Collection[*corev1.Service]
	EndpointSlices krt.Collection[*discoveryv1.EndpointSlice]
	// DestinationRules may be nil: no TLS from DestinationRules.
	DestinationRules krt.Collection[kubelib.DestinationRule]
	// BackendTLSPolicies may be nil: no TLS from BackendTLSPolicies. When
	// set, ConfigMaps must be set too (caCertificateRefs).
	BackendTLSPolicies krt.Collection[*gwv1.BackendTLSPolicy]
	ConfigMaps         krt.Collection[*corev1.ConfigMap]
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
	// EPPTLS has one entry per Service host with client TLS, keyed by host.
	EPPTLS krt.Collection[model.EPPTLS]
	// BackendTLSPolicies is every BackendTLSPolicy resolved (its CA bundle
	// read, or why it is invalid); nil without Inputs.BackendTLSPolicies.
	// Exposed for debugging and for a future status writer.
	BackendTLSPolicies krt.Collection[BackendTLS]
}

// Build derives the registry's collections from in:
//
//	EndpointSlices indexed by kubernetes.io/service-name ─┐
//	Services ─────────────────────────────────────────────┴─► Endpoints
//	BackendTLSPolicies (+ConfigMaps) ─► BackendTLSPolicies indexed by target ─┐
//	DestinationRules indexed by host FQDN ────────────────────────────────────┤
//	Services ─────────────────────────────────────────────────────────────────┴─► EPPTLS
//
// Each Service is one transformation input, so an EndpointSlice, policy or
// ConfigMap change recomputes only the Services it belongs to. Build panics
// when a required input is nil.
func Build(in Inputs, opts Options) Outputs {
	if in.Services == nil || in.EndpointSlices == nil {
		panic("serviceregistry/kube.Build: Inputs.Services and Inputs.EndpointSlices are required")
	}
	if in.BackendTLSPolicies != nil && in.ConfigMaps == nil {
		panic("serviceregistry/kube.Build: Inputs.BackendTLSPolicies needs Inputs.ConfigMaps")
	}
	with := func(name string) []krt.CollectionOption {
		return append(slices.Clone(opts.Krt), krt.WithName("serviceregistry/"+name))
	}
	var out Outputs

	bySvc := krt.NewIndex(in.EndpointSlices, "endpointslices-by-service", SliceServiceKeys)
	out.Endpoints = krt.NewManyCollection(in.Services, EndpointsBuilder(bySvc, opts.ClusterDomain), with("Endpoints")...)

	var rules krt.Index[string, kubelib.DestinationRule]
	if in.DestinationRules != nil {
		rules = krt.NewIndex(in.DestinationRules, "destinationrules-by-host", func(dr kubelib.DestinationRule) []string {
			if h := DestinationRuleHost(dr, opts.ClusterDomain); h != "" {
				return []string{h}
			}
			return nil
		})
	}
	var policies krt.Index[string, BackendTLS]
	if in.BackendTLSPolicies != nil {
		out.BackendTLSPolicies = krt.NewCollection(in.BackendTLSPolicies, BackendTLSBuilder(in.ConfigMaps), with("BackendTLSPolicies")...)
		policies = krt.NewIndex(out.BackendTLSPolicies, "backendtlspolicies-by-service", func(b BackendTLS) []string {
			return b.Targets
		})
	}
	out.EPPTLS = krt.NewCollection(in.Services, EPPTLSBuilder(rules, policies, opts.ClusterDomain), with("EPPTLS")...)
	return out
}

// ServiceHost is a Service's FQDN: <name>.<namespace>.svc.<clusterDomain>.
func ServiceHost(name, namespace, clusterDomain string) string {
	return name + "." + namespace + ".svc." + clusterDomain
}
