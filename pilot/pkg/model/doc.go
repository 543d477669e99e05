// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package model holds the contract between the Gateway API controller
// (pilot/pkg/config/kube/gateway), which computes it, and the xDS translator
// (pilot/pkg/networking/core), which turns it into Envoy resources. One
// Gateway value is everything one Gateway's Envoy needs: its listeners, the
// routes attached to each, and every route rule's backends resolved
// (Services, and InferencePools with their shadow Service and Endpoint
// Picker).
//
// GatewayServing runs the other way: what the ADS server does not serve of a
// Gateway's translation, for the controller's Gateway status.
//
// Values are immutable once built: the controller's krt collections share
// them between readers.
//
// # Files
//
//   - gateway.go: Gateway, Listener (with its TLS and its pre-routing
//     filters: ListenerFilter, ExternalProcessor), Route, Rule and the
//     resolved backends (ServiceBackend, PoolBackend, EPPBackend), a rule's
//     ExternalAuth filters, and the order of routes.
//   - service.go: what the service registry adds: Endpoint, ClusterEndpoints
//     and UpstreamTLS (client TLS towards a backend).
//   - serving.go: GatewayServing and RefusedResource, the ADS server's report
//     of what it does not serve as translated.
package model
