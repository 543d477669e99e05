// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package kube is the Kubernetes service registry: it turns Services,
// EndpointSlices and TLS policies into the service model the xDS translator
// reads (pilot/pkg/model). It is krt wiring only: it never writes to the API
// server.
//
// Inputs (Inputs): Services, EndpointSlices, Istio DestinationRules (the
// fields pkg/kube reads), Gateway API BackendTLSPolicies and the ConfigMaps
// their caCertificateRefs name.
//
// Outputs (Outputs):
//   - Endpoints: one model.ClusterEndpoints per Service port, named
//     outbound|<port>||<name>.<namespace>.svc.<domain>, with the ready
//     addresses of the Service's EndpointSlices (endpoints.go). A pool's
//     shadow Service is special: the cluster of its first port carries the
//     endpoints of every target port.
//   - EPPTLS: one model.EPPTLS per Service host that a BackendTLSPolicy or a
//     DestinationRule (mode SIMPLE) gives client TLS (tls.go). The xDS
//     translator reads it only for Endpoint Picker clusters.
//
// Rules callers keep: Services and EndpointSlices are required; the TLS
// inputs may be nil (no TLS from that source). Pass krt.WithStop in
// Options.Krt so the derived collections are released. Transformations are
// pure functions of what they Fetch (ServiceEndpoints, ResolveBackendTLSPolicy
// and DestinationRuleTLS can be called directly); the only side effect is a
// warning, with the policy's key, when a BackendTLSPolicy is invalid.
//
// # Files
//
//   - registry.go: Inputs, Options, Outputs and Build, which wires the
//     collections; ServiceHost.
//   - endpoints.go: ServiceEndpoints and EndpointsBuilder: one
//     model.ClusterEndpoints per Service port from its ready EndpointSlice
//     addresses, the shadow Service's first port carrying every target port.
//   - tls.go: client TLS per Service host: BackendTLSPolicies resolved (their
//     CA ConfigMaps read), DestinationRules of mode SIMPLE, and which one wins.
package kube
