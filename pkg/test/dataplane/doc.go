// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package dataplane is a small Envoy stand-in for tests: it reads an Envoy
// bootstrap, connects to the ADS server it names, and serves HTTP exactly as
// the xDS it receives says, no more. It exists because no Envoy binary can be
// had where the tests run.
//
// # Inputs and outputs
//
// New takes the bootstrap JSON (envoy.config.bootstrap.v3.Bootstrap, as
// pkg/bootstrap writes it): node, dynamic_resources.ads_config (api_type
// GRPC = state of the world, DELTA_GRPC = incremental) and the ADS transport
// (an envoy_grpc static cluster: socket address, HTTP/2, optional
// UpstreamTlsContext; or google_grpc with ssl credentials and the
// file_based_metadata call credentials, sent as "authorization: Bearer" only
// under the credentials factory of that name, ignored under Envoy's default
// factory, as Envoy does).
// Options.EnvoyVersion is the Envoy release it behaves as (default
// DefaultEnvoyVersion, 1.40.0: the release of the go-control-plane API
// module it is built on and of the Gateway Deployments' image); the node it
// sends declares it in user_agent_build_version, with user_agent_name
// "envoy", unless the bootstrap sets them (as Envoy, source/server/server.cc).
// Options.ServiceNode replaces the bootstrap node's id, as Envoy's
// --service-node does. Listeners bind 127.0.0.1:<port> (or where
// Options.ListenerAddress says), or, with Options.BindListenerAddresses, at
// their own socket_address, as Envoy does.
// Run keeps an ADS stream up (reconnecting with bounded backoff) and, with
// BindListenerAddresses, serves the bootstrap's admin and static listeners
// (server.go); Addr gives each xDS listener's bound address; Snapshot and
// WaitFor expose the configuration in effect, the server state and the
// counters; State is the server state alone.
//
// # Files
//
// Configuration:
//
//   - dataplane.go: DataPlane, New, Options and Run: the active configuration
//     (clusters from warming.go, a listener once its route configurations and
//     SDS secrets arrived), the listeners, Addr, Snapshot, WaitFor and the
//     counters.
//   - bootstrap.go: the bootstrap's node and ADS transport: an envoy_grpc
//     static cluster, or google_grpc with file_based_metadata call credentials
//     under the factory of that name.
//   - xds.go: the ADS client: LDS and CDS wildcard, then RDS for the route
//     configurations and SDS for the secrets the listeners name, and EDS for
//     the clusters' service names; ACK / NACK with version, nonce and
//     error_detail.
//   - warming.go: cluster warming as Envoy's cluster manager does it: a new or
//     replaced cluster is used only once an assignment arrives after it, or its
//     eds_config.initial_fetch_timeout fires (then with no endpoints); until
//     then the previous version serves.
//   - allowed.go: the one list of proto fields the data plane implements, and
//     the protoreflect walk that refuses any other set field (Anys included).
//   - version.go: the Envoy version it behaves as: the node it declares, and
//     fields newer than that version (fieldsIntroduced) ignored with a warning
//     and a counter, as an older Envoy ignores an unknown field.
//   - invalid.go: InvalidConfigError, configuration Envoy itself rejects, with
//     Envoy's message.
//   - listener.go: Listener compiled: filter chains, the HTTP connection
//     manager and its HTTP filters; any error NACKs the response.
//   - route.go: RouteConfiguration compiled: virtual hosts, matches, actions,
//     header mutations; any error NACKs the response.
//   - cluster.go: Cluster compiled: EDS over ADS, timeouts, keepalive, circuit
//     breakers, protocol options, the override_host load balancing policy and
//     upstream TLS; and the healthy endpoints of an assignment. Any error NACKs
//     the response.
//   - tls.go: TLS listeners: the TLS inspector, filter chain selection by SNI
//     (exact, longest wildcard, then the chain without server_names),
//     termination with the chain's SDS certificate and ALPN, SDS secrets.
//   - tcp_proxy.go: listeners whose chains end in the TCP proxy network
//     filter: TCP, TLS passed through by SNI, or TLS terminated in front of
//     the proxy; cluster or weighted clusters per connection, the upstream
//     connect, bytes both ways with half-close, the idle timeout.
//   - tls_inspector.go: the TLS inspector on such a listener: the
//     ClientHello's server name read and its bytes replayed to the chain,
//     non-TLS bytes passed on, the size limit and the listener filter
//     timeout.
//   - header_parser.go: Envoy's HeaderParser: headers_to_add and
//     headers_to_remove, refusing host and ':'-prefixed names.
//   - substitution_formatter.go: the substitution format parser for header
//     values ("%%" is '%'; commands are not implemented).
//   - regex.go: the google_re2 regex engine: RE2 syntax and the program size
//     limit re2.max_program_size.error_level, through pkg/re2size.
//   - runtime.go: the bootstrap's layered_runtime (static layers) and the RE2
//     program size limit it sets (Envoy's default, 100, without one).
//
// The server, from the bootstrap:
//
//   - static.go: the bootstrap's static_resources (listeners with inline
//     routes; STATIC and STRICT_DNS clusters, which serve beside CDS's) and
//     admin, checked against the allowed fields.
//   - server.go: the admin listening from the start and the static listeners'
//     sockets bound at start and listening once the server is initialized, as
//     Envoy's server does.
//   - listen_socket.go: a static listener's socket, bound at start and
//     listening later, with Envoy's backlog.
//   - init.go: ServerState (PRE_INITIALIZING, INITIALIZING, LIVE, after Envoy's
//     init manager: clusters warmed from the first CDS, then listeners with
//     their routes from the first LDS).
//   - admin.go: the admin's /ready (200 "LIVE\n", else 503 and the state's
//     name), every other admin path 404, so the Gateway's readiness probe on
//     the status port passes exactly when Envoy's would.
//
// Serving a connection (TCP proxy): tcp_proxy.go and tls_inspector.go above.
//
// Serving a request:
//
//   - handler.go: the HTTP connection manager of one listener: the headers it
//     adds, Host port stripping, virtual host and route selection, and the
//     response written downstream.
//   - pathnorm.go: normalize_path: dot segments resolved, and what depends on
//     googleurl's version refused (400).
//   - filterchain.go: the HTTP filters as Envoy's FilterManager runs them:
//     decoders in order, encoders in reverse, a filter's own reply through
//     every encoder filter; CORS and ext_proc (through package extproc).
//   - ext_authz.go: the ext_authz filter: its configuration, per-route
//     enabling, body buffering, and OK / Denied / Error as local replies or
//     the request going on.
//   - ext_authz_check.go: the check: the CheckRequest, the gRPC and HTTP
//     clients, and the header mutations of an OK answer under the mutation
//     rules.
//   - cors.go: the CORS filter: preflights answered, and the allow headers on
//     responses to allowed origins.
//   - upstream.go: the router: redirects, direct responses, forwarding with
//     header mutations, rewrites, timeout, retries and mirrors; the
//     override_host load balancer; the per-cluster connection pool and circuit
//     breaker.
//
// The command cmd/dataplane runs it as a process started with Envoy's command
// line (-c FILE --service-node ID), for pods run as local processes; see its
// doc.go.
//
// # Where it knowingly differs from Envoy
//
//   - A response with any invalid resource is rejected whole; Envoy applies
//     the valid listeners and clusters of a state-of-the-world response and
//     NACKs the rest.
//   - Only the fields in allowed.go are implemented; everything else is
//     NACKed where Envoy would act on it. Notably: TLS listener options
//     beyond server_names, one SDS certificate, ALPN and an inline client
//     CA (tls.go), vhost- and route-configuration-level
//     header mutations and per-filter configs, substitution format commands
//     (%COMMAND%) in header values, hash policies, retry_policy beyond retry_on
//     (5xx, gateway-error, reset, connect-failure, retriable-status-codes),
//     retriable_status_codes, num_retries, per_try_timeout and
//     retry_back_off, health checks,
//     outlier detection, locality weights and priorities, non-EDS clusters.
//   - Warming (warming.go): a cluster whose initial fetch timed out gets no
//     endpoints (Envoy with its EDS cache uses the last assignment); a
//     listener whose Rds changes does not wait for a new route
//     configuration, and an unset RDS initial_fetch_timeout waits without
//     bound.
//   - Circuit breakers: max_requests is enforced per cluster (503 with
//     x-envoy-overloaded); max_connections is applied per endpoint (Go's
//     MaxConnsPerHost), max_pending_requests and max_retries are accepted and
//     not enforced.
//   - Local replies carry Envoy's status codes and plain-text bodies (404
//     without a route, cluster_not_found_response_code (503 by default),
//     503 "no healthy upstream", 503 connect failure / reset, 504
//     "upstream request timeout") but no x-envoy-* or server headers.
//   - The connection manager adds x-forwarded-for (use_remote_address),
//     x-forwarded-proto and x-request-id; not x-envoy-expected-rq-timeout-ms,
//     x-envoy-attempt-count or via. normalize_path resolves dot segments
//     and refuses (400) what depends on googleurl's version (pathnorm.go);
//     with strip_any_host_port the Host header itself loses its port
//     before routing, as Envoy's HeaderUtility::stripPortFromHost does, so
//     upstreams see it without.
//   - Upstream: Go's HTTP client (HTTP/1.1, HTTP/2 over TLS, h2c with prior
//     knowledge); hop-by-hop headers dropped; no connection draining on
//     cluster change beyond closing idle connections.
//   - TLS to upstreams verifies the chain against trusted_ca and the DNS
//     and URI subject alternative name matchers (not the SNI), and nothing
//     without a validation context, as Envoy; a DNS matcher compares names exactly,
//     where Envoy also accepts a wildcard certificate name (stricter); the
//     ext_proc gRPC channel, when the cluster sets no sni, sends the
//     authority as SNI (Go gRPC's behaviour).
//   - Request mirroring is fire-and-forget with a fixed 10 s bound, and
//     starts once the router has read the whole body (Envoy streams it).
//   - The file_based_metadata token is trimmed of surrounding white space.
//   - Weighted cluster choice uses Options.Rand, not Envoy's per-request
//     random value or x-envoy-stable-hash headers; the same for the TCP
//     proxy's weighted clusters.
//   - TCP proxy: circuit breakers are not enforced on its connections, and
//     its upstream host is picked by round robin whatever the cluster's
//     policy. The TLS inspector parses with Go's TLS stack: a ClientHello
//     Go refuses gets no server name (stricter).
//   - The admin implements only /ready. The admin and static listeners are
//     served only with Options.BindListenerAddresses (checked, not bound,
//     otherwise). The server reaches LIVE only from accepted first LDS and
//     CDS responses (Envoy also goes LIVE after a rejected first response
//     or the initial_fetch_timeout). An xDS listener or cluster named like
//     a static one is NACKed.
//   - The RE2 program size compared with the runtime limit is pkg/re2size's
//     bound, never lower than RE2's (stricter near the limit; the NACK
//     message's size may differ from Envoy's); Unicode classes are refused
//     as not implemented.
//   - Run as an older Envoy, a field newer than it is cleared from the
//     resource (Snapshot shows it without the field; an old Envoy keeps the
//     bytes as unknown), and --reject-unknown-dynamic-fields is not
//     modelled. At its default version any unknown field is refused.
//
// # Rules for callers
//
// Call Run once; everything it opened is closed when it returns. Snapshot
// protos are shared: do not modify them. Tests wait with WaitFor (it wakes
// on every configuration change), never with sleeps.
package dataplane
