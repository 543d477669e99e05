// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package core translates one Gateway (pilot/pkg/model.Gateway) into the
// Envoy xDS resources its proxy needs: listeners (LDS), route configurations
// (RDS), clusters (CDS) and cluster load assignments (EDS).
//
// Everything here is a pure function of its arguments: no clients, no clock,
// no logging, no map-order leaks. The same inputs give byte-identical
// resources in the same order, so the ADS server can compare versions.
//
// One file per xDS type:
//
//   - listener.go: one Listener per distinct Gateway listener port, with an
//     HTTP connection manager that fetches its routes over RDS and runs the
//     HTTP filters cors, ext_proc (when inference is enabled) and router.
//   - extproc.go: the inert ext_proc filter on the listener and the
//     per-route override that sends a pool's requests to its Endpoint Picker.
//   - route.go, route_hosts.go, route_match.go, route_filters.go,
//     route_headers.go, route_order.go: one RouteConfiguration per port,
//     virtual hosts per hostname, routes in Gateway API precedence order;
//     header modifiers in the form Envoy accepts (Host as
//     host_rewrite_literal, values escaped for Envoy's formatter).
//   - route_cors.go: the route that answers CORS preflights of a pool's
//     rule without its EPP.
//   - regex.go: checkRegex, whether the Gateway's Envoy accepts a user
//     regex (RE2 syntax, and the program size limit the bootstrap sets,
//     through pkg/re2size).
//   - cluster.go: EDS clusters named outbound|<port>||<host> for Services,
//     InferencePool shadow Services (OverrideHost load balancing) and
//     Endpoint Pickers (HTTP/2, optional TLS).
//   - endpoint.go: a ClusterLoadAssignment for every EDS cluster.
//   - gateway.go: BuildGateway, which runs all of the above.
//   - validate.go, validate_headers.go: Validate, the check the push path
//     runs before serving; validate_subset.go: ValidSubset, what of a set
//     that fails can still be served (per resource, virtual host and route
//     rule, preferring the last good version).
//   - names.go, inputs.go: resource names and extension names; Inputs and
//     Options.
//
// What the model does not carry (endpoints, knobs) is plain values in
// Inputs and Options, so the service registry can feed them without this
// package knowing where they come from. Client TLS of every upstream is in
// the model (ServiceBackend.TLS, EPPBackend.TLS, Rule.Mirrors), resolved by
// the controller; a Gateway gets the CA read in its own namespace
// (model.EPPTLS.CAFor), and an upstream whose CA it cannot have is
// answered 500 there, never built as a cluster (upstream_tls_test.go).
//
// Callers keep two rules: model values are not mutated after they are handed
// in, and every Resources value is passed through Validate before it is
// served.
package core
