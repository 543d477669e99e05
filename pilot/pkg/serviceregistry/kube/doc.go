// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package kube is the Kubernetes service registry: it turns Services and
// EndpointSlices into the endpoints the xDS translator serves
// (pilot/pkg/model). It is krt wiring only: it never writes to the API
// server. Client TLS towards Services is not here: the controller
// resolves it, once for every upstream (pilot/pkg/config/kube/upstreamtls).
//
// Inputs (Inputs): Services and EndpointSlices.
//
// Outputs (Outputs):
//   - Endpoints: one model.ClusterEndpoints per Service port, named
//     outbound|<port>||<name>.<namespace>.svc.<domain>, with the ready
//     addresses of the Service's EndpointSlices (endpoints.go). A pool's
//     shadow Service is special: the cluster of its first port carries the
//     endpoints of every target port.
//
// Rules callers keep: both inputs are required. Pass krt.WithStop in
// Options.Krt so the derived collections are released. Transformations are
// pure functions of what they Fetch (ServiceEndpoints can be called
// directly).
//
// # Files
//
//   - registry.go: Inputs, Options, Outputs and Build, which wires the
//     collections; ServiceHost.
//   - endpoints.go: ServiceEndpoints and EndpointsBuilder: one
//     model.ClusterEndpoints per Service port from its ready EndpointSlice
//     addresses, the shadow Service's first port carrying every target port.
package kube
