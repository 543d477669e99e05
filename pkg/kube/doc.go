// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package kube is the control plane's connection to a Kubernetes cluster: one
// Client that bundles the clients it needs, the shared informers over them,
// and the krt collections (package krt) that the rest of infermesh derives
// everything from.
//
// Inputs: a kubeconfig (NewFromKubeconfig), the pod's service account
// (NewInCluster), a rest.Config (NewFromRESTConfig), or objects for client-go
// fakes (NewFake, for unit tests). Outputs: the clientsets (Kube, GatewayAPI,
// Inference, Dynamic), the informer factories, and one memoized krt
// collection per type (Pods, Services, EndpointSlices, Namespaces, Secrets,
// Nodes, Gateways, GatewayClasses, HTTPRoutes, ReferenceGrants, GRPCRoutes,
// InferencePools, BackendTLSPolicies, DestinationRules, ListenerSets,
// TLSRoutes, TCPRoutes).
//
// # Informers
//
// Every informer strips metadata.managedFields (StripManagedFields), except
// the server-side apply entries of the field managers given to
// WithAppliedFieldsOf (the control plane's own, so its writers can compare
// what they applied with the cache instead of reading each object). Gateway API, GatewayClass, HTTPRoute,
// ReferenceGrant and core types are required: their collections are
// krt.NewInformer over the shared factories and sync once listed. InferencePool,
// GRPCRoute, BackendTLSPolicy, DestinationRule, ListenerSet, TLSRoute and
// TCPRoute are optional CRDs
// (optional.go): a small informer watches the one CRD object; while it is
// absent, not Established, or does not serve the version we read, the
// collection is synced and empty; when it appears the object informer starts
// and fills the collection; when it goes away the informer stops and the
// collection empties. A cluster without the inference extension or Istio
// therefore runs, and installing them later needs no restart.
//
// # Rate limits
//
// One token bucket (WithQPS, WithBurst; defaults 100 and 200, see
// DefaultQPS) is shared by all clientsets of a Client. client-go's own default
// of 5 QPS would take minutes to write the shadow Services and status entries
// of 1,000 InferencePools.
//
// # DestinationRule: dynamic, not istio.io/client-go
//
// The control plane reads five fields of one Istio type (spec.host and
// spec.trafficPolicy.tls). It reads them through the dynamic client and
// converts them in the informer's transform into the small DestinationRule
// struct, so the informer cache holds only those fields, not every
// DestinationRule of the cluster with its subsets and policies. The typed
// alternative, istio.io/client-go v1.32.0, would add istio.io/client-go and
// an unreleased istio.io/api pseudo-version (10 MB of module source), the
// deprecated github.com/golang/protobuf and genproto to the module graph, and
// it would still need the optional-CRD handling above.
//
// Build cost, measured with Go 1.26.8 on 2 cores (with other builds running,
// so wall times are noisy; user CPU is the steadier figure), for a tiny main
// that imports istio.io/client-go/pkg/apis/networking/v1 against one that
// reads spec.host from unstructured, both also importing k8s.io/client-go
// dynamic:
//
//	                              with istio   without   difference
//	cold build cache, user CPU    45.6 s       38-42 s   +4-7 s
//	only the extra packages       6.5 s user, 8.8 s wall (shared cache warm)
//	packages linked               367          315       +52
//	binary size                   15.6 MB      11.3 MB   +4.4 MB
//
// Most of the extra packages and bytes are the protobuf runtime, which the
// control plane links anyway for xDS; Istio's own symbols are about 170 kB.
// So build time was not the deciding cost: the module graph and the size of
// the informer cache were.
//
// A malformed DestinationRule is logged with its key and left out of the
// collection; it never stops the informer or the process.
//
// # Rules for callers
//
//   - Ask for collections, then Start. Collections asked for after Start
//     start their informers at once.
//   - The first Start's stop channel, or Shutdown, ends the Client: informers
//     stop and every collection is released. Shutdown also waits for the
//     informer goroutines, so tests can check for leaks.
//   - Objects in collections are shared: never modify them.
//   - Use the factories directly only for what has no collection here, and
//     never for an optional type: a shared informer for an absent CRD never
//     syncs.
//
// # Files
//
//   - client.go: Client and its constructors, the clientsets with one shared
//     rate limiter, the informer factories, Start, WaitForCacheSync and
//     Shutdown.
//   - options.go: Option: WithQPS, WithBurst, WithResync, WithDebugging,
//     WithAppliedFieldsOf.
//   - collections.go: one memoized krt collection per type (Pods, Services,
//     ..., DestinationRules).
//   - transform.go: the informer transforms: managedFields stripped (or only
//     our apply entries kept), and Secrets cut to what TLS needs.
//   - optional.go: collections over optional CRDs, started and stopped as the
//     CRD appears and goes away.
//   - crd.go: the small informer that watches one CRD object and keeps only its
//     name, version and whether it is Established and serves our version.
//   - destinationrule.go: DestinationRule, the fields read of Istio's type,
//     converted from unstructured in the informer's transform.
//   - externalprocessor.go: infermesh.io ExternalProcessors (what listener
//     filters name), read through the dynamic client.
//   - fake.go: NewFake over client-go fakes for unit tests, and Established
//     CRDs for the optional types.
package kube
