// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package core translates one Gateway (pilot/pkg/model.Gateway) into the
// Envoy xDS resources its proxy needs: listeners (LDS), route configurations
// (RDS), clusters (CDS) and cluster load assignments (EDS).
//
// Pure and stateful parts. The builders (BuildGateway, BuildListeners,
// BuildRouteConfigurations, BuildClusters, BuildEndpoints, BuildSecret),
// CheckRoute, Validate and ValidSubset are functions of their arguments: no
// clients, no clock, no map-order leaks. The same inputs give byte-identical
// resources in the same order, so the ADS server can compare versions. Two
// things beside the result: buildRoutes logs at debug level a rule it leaves
// out (the controller reports the same problem in the route's status), and
// validate.go caches, process-wide, which fields of each proto type can hold
// an Any (a fact about types, never about values).
//
// Two types keep state, each for one Gateway across its successive
// translations:
//
//   - Translator keeps the last listeners, route configurations and clusters
//     with what each route contributed to them, so that a change recomputes
//     only what it touches. Its output is byte for byte what the builders
//     return for the same Gateway (TestTranslatorMatchesFullTranslation and
//     FuzzTranslator check it over random change sequences). Safe for
//     concurrent use: calls are serialized.
//   - SetValidator keeps the last set that passed Validate and checks only
//     what is new in the next one, answering as Validate would
//     (TestSetValidatorAnswersAsValidate, FuzzSetValidator). Not safe for
//     concurrent use.
//
// The ADS server (pilot/pkg/xds) holds one of each per Gateway.
//
// What the model does not carry (endpoints, knobs) is plain values in
// Inputs and Options, so the service registry can feed them without this
// package knowing where they come from. Client TLS of every upstream is in
// the model (ServiceBackend.TLS, EPPBackend.TLS, Rule.Mirrors), resolved by
// the controller; a Gateway gets the CA read in its own namespace
// (model.UpstreamTLS.CAFor), and an upstream whose CA it cannot have is
// answered 500 there, never built as a cluster (upstream_tls_test.go).
//
// Callers keep two rules: model values are not mutated after they are handed
// in, and every Resources value is passed through Validate (or a
// SetValidator, which answers as Validate does) before it is served.
//
// # Files
//
// The builders, one file per xDS type or part of one:
//
//   - gateway.go: Resources and BuildGateway, which runs the builders below on
//     one Gateway and then Validate.
//   - listener.go: BuildListeners: one Listener per distinct Gateway listener
//     port, for HTTP and HTTPS its HTTP connection manager fetching routes
//     over RDS with the listener filters, then cors, ext_authz (one per
//     distinct ExternalAuth of the Gateway's routes), ext_proc (when
//     inference is on) and router, and TLS termination over SDS.
//   - listenerfilter.go: pre-routing listener filters (Gateway API
//     Listener.filters.requests): one disabled HTTP filter per filter ahead
//     of the others (an ExternalProcessor's ext_proc, route_cache_action
//     CLEAR, mutation rules), enabled on its own listener's virtual hosts,
//     which end with a 404 catch-all route; the early removal of a
//     client's X-Gateway-Model-Name on every connection manager.
//   - listener_stream.go: the listeners of TLS and TCP ports: which route
//     gets each server name (StreamPortClaims), filter chains passing TLS
//     through or terminating it, each ending in a TCP proxy to the rule's
//     backends by weight (tcpProxyFilter).
//   - extauthz.go: ExternalAuth as Envoy's ext_authz: one disabled HTTP
//     filter per distinct configuration of the Gateway's rules (named by a
//     digest), enabled per route, failing closed; the authorization
//     server's cluster; the upstream-header expression.
//   - extproc.go: the inert listener-level ext_proc filter, and the
//     ExtProcPerRoute override that sends a pool's requests through its
//     Endpoint Picker, with the body mode the Gateway asks for.
//   - route.go: BuildRouteConfigurations: one RouteConfiguration per HTTP port
//     and per HTTPS filter chain, virtual hosts per hostname (421 for another
//     listener's hosts on a chain), and each rule's action: its backends,
//     weighted clusters, timeouts and retries.
//   - route_check.go: CheckRoute and buildRule: each rule translated alone,
//     with the problem that keeps it from being served (what route status
//     reports).
//   - route_hosts.go: the Gateway API intersection of listener and route
//     hostnames, and wildcard cover.
//   - route_match.go: HTTPRouteMatch and GRPCRouteMatch as Envoy RouteMatch:
//     path, header, query parameter and method matchers.
//   - route_order.go: orderKey, the Gateway API precedence of the routes in one
//     virtual host.
//   - route_filters.go: the route filters: RequestRedirect, URLRewrite,
//     RequestMirror and CORS in Envoy's form.
//   - route_headers.go: RequestHeaderModifier and ResponseHeaderModifier in the
//     form Envoy accepts (Host as host_rewrite_literal, values escaped for its
//     formatter), and those it would refuse.
//   - route_cors.go: the route that answers CORS preflights of a pool's rule
//     without calling its EPP.
//   - regex.go: checkRegex, whether the Gateway's Envoy accepts a user regex
//     (RE2 syntax, and the program size limit the bootstrap sets, through
//     pkg/re2size).
//   - cluster.go: BuildClusters: EDS clusters named outbound|<port>||<host> for
//     Services, InferencePool shadow Services (OverrideHost load balancing) and
//     Endpoint Pickers (HTTP/2), with upstream TLS where configured.
//   - endpoint.go: BuildEndpoints: a ClusterLoadAssignment for every EDS
//     cluster, endpoints in a stable order.
//   - secret.go: SDS: the names of listener certificates, the checks Envoy
//     makes of a TLS Secret and a CA bundle, and BuildSecret.
//   - names.go: resource names (clusters, route configurations, listeners) and
//     the names of filters, extensions and metadata keys.
//   - inputs.go: Inputs (endpoints and TLS, which the model does not carry) and
//     Options (the knobs, with their defaults).
//   - protoutil.go: deterministic Any marshalling and the ADS config source.
//
// The checks before serving:
//
//   - validate.go: Validate: Envoy's proto rules on every resource and every
//     Any inside it, unique names, and every reference resolved.
//   - validate_headers.go: the header additions and removals Envoy's
//     HeaderParser refuses, and literal format strings.
//   - validate_incremental.go: SetValidator, which keeps the last set that
//     passed and checks only what is new in the next (state).
//   - validate_subset.go: ValidSubset and Refusal: what of a set that fails
//     Validate can still be served, per resource, virtual host and route rule,
//     preferring the last good version.
//
// The incremental translator (state, one per Gateway):
//
//   - incremental.go: Translator, NewTranslator and Build: listeners reused
//     while the Gateway without its routes is equal, and route configurations
//     rebuilt per changed route and hostname.
//   - incremental_clusters.go: the Translator's clusters, each kept while the
//     references that shape it are equal (a Gateway with listener filters
//     gets its clusters built whole).
//   - routediff.go: routeList.diff, which lines up a listener's current routes
//     with the last translation's: kept, changed, added, removed.
//   - vhlist.go: spliceVHosts, the sorted list of virtual hosts updated in one
//     pass.
package core
