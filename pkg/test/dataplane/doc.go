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
// One file per Envoy counterpart; each item names that file by its path in
// Envoy's source tree (github.com/envoyproxy/envoy). A file with no Envoy
// counterpart says so.
//
// The server and its configuration:
//
//   - dataplane.go: source/server/server.cc (InstanceImpl): DataPlane, New,
//     Options and Run: the active configuration (clusters from
//     cluster_manager.go, a listener once its route configurations and SDS
//     secrets arrived), the listeners, Addr, Snapshot, WaitFor and the
//     counters.
//   - bootstrap.go: source/server/configuration_impl.cc (MainImpl): the
//     bootstrap's node and ADS transport: an envoy_grpc static cluster, or
//     google_grpc with file_based_metadata call credentials under the
//     factory of that name.
//   - grpc_mux.go: source/extensions/config_subscription/grpc/grpc_mux_impl.cc
//     (and new_grpc_mux_impl.cc for delta): the ADS client: LDS and CDS
//     wildcard, then RDS for the route configurations and SDS for the
//     secrets the listeners name, and EDS for the clusters' service names;
//     ACK / NACK with version, nonce and error_detail; Apply, resources
//     taken as an accepted response without a stream.
//   - decoded_resource.go: source/common/config/decoded_resource_impl.h: a
//     received resource unpacked, its newer fields dropped as its Envoy
//     version would, validated (allowed.go) and compiled; Validate, the
//     verdict alone.
//   - cluster_manager.go: source/common/upstream/cluster_manager_impl.cc
//     (addOrUpdateCluster, ClusterManagerInitHelper): cluster warming: a new
//     or replaced cluster is used only once an assignment arrives after it,
//     or its eds_config.initial_fetch_timeout fires (then with no
//     endpoints); until then the previous version serves.
//   - allowed.go: source/common/protobuf/utility.cc
//     (MessageUtil::checkForUnexpectedFields): the one list of proto fields
//     the data plane implements, and the protoreflect walk that refuses any
//     other set field (Anys included).
//   - version.go: source/common/version/version.cc: the Envoy version it
//     behaves as: the node it declares, and fields newer than that version
//     (fieldsIntroduced) ignored with a warning and a counter, as an older
//     Envoy ignores an unknown field.
//   - invalid.go: envoy/common/exception.h (EnvoyException):
//     InvalidConfigError, configuration Envoy itself rejects, with Envoy's
//     message.
//   - static.go: source/server/configuration_impl.cc (static_resources):
//     the bootstrap's static listeners with inline routes, STATIC and
//     STRICT_DNS clusters (serving beside CDS's) and admin, checked against
//     the allowed fields.
//   - server.go: source/server/server.cc (startWorkers): the admin listening
//     from the start and the static listeners' sockets bound at start and
//     listening once the server is initialized.
//   - listen_socket.go: source/common/network/listen_socket_impl.cc: a
//     static listener's socket, bound at start and listening later, with
//     Envoy's backlog.
//   - init.go: source/common/init/manager_impl.cc: ServerState
//     (PRE_INITIALIZING, INITIALIZING, LIVE: clusters warmed from the first
//     CDS, then listeners with their routes from the first LDS).
//   - admin.go: source/server/admin/admin.cc: /ready (200 "LIVE\n", else 503
//     and the state's name), every other admin path 404.
//   - runtime.go: source/common/runtime/runtime_impl.cc: the bootstrap's
//     layered_runtime (static layers) and the RE2 program size limit it sets
//     (Envoy's default, 100, without one).
//   - regex.go: source/common/common/regex.cc: the google_re2 regex engine:
//     RE2 syntax and the program size limit
//     re2.max_program_size.error_level, through pkg/re2size.
//   - substitution_formatter.go: source/common/formatter/
//     substitution_formatter.cc: the format parser for header values ("%%"
//     is '%'; commands are not implemented).
//
// Listeners and connections:
//
//   - listener.go: source/common/listener_manager/listener_impl.cc: Listener
//     compiled: filter chains, the HTTP connection manager and its HTTP
//     filters; any error NACKs the response.
//   - filter_chain_manager.go: source/common/listener_manager/
//     filter_chain_manager_impl.cc (findFilterChainForServerName): a TLS
//     listener's filter chain chosen by SNI: exact, longest wildcard, then
//     the chain without server_names.
//   - tls_inspector.go: source/extensions/filters/listener/tls_inspector/
//     tls_inspector.cc: the ClientHello's server name read and its bytes
//     replayed to the chain, non-TLS bytes passed on, the size limit and the
//     listener filter timeout.
//   - tls.go: source/common/tls/server_context_impl.cc: TLS termination with
//     the chain's SDS certificate and ALPN, client certificate validation,
//     the connection keeping the chain of its handshake.
//   - sds_api.go: source/common/secret/sds_api.cc: an SDS secret loaded (a
//     TlsCertificate inline) and a validation context's trusted_ca bundle.
//   - tcp_proxy.go: source/common/tcp_proxy/tcp_proxy.cc: listeners whose
//     chains end in the TCP proxy network filter: TCP, TLS passed through by
//     SNI, or TLS terminated in front of the proxy; cluster or weighted
//     clusters per connection, the upstream connect, bytes both ways with
//     half-close, the idle timeout.
//
// Serving a request, in the order Envoy runs it:
//
//   - conn_manager.go: source/common/http/conn_manager_impl.cc: the HTTP
//     connection manager of one listener: the headers it adds
//     (ConnectionManagerUtility), Host port stripping, virtual host and
//     route selection, and the response written downstream.
//   - path_utility.go: source/common/http/path_utility.cc: normalize_path:
//     dot segments resolved, and what depends on googleurl's version refused
//     (400).
//   - filter_manager.go: source/common/http/filter_manager.cc: filterManager,
//     the HTTP filters of one request: decoders in order, encoders in
//     reverse, a filter's own reply through every encoder filter; CORS,
//     ext_authz and ext_proc (through package extproc).
//   - cors_filter.go: source/extensions/filters/http/cors/cors_filter.cc: the
//     CORS filter: preflights answered, and the allow headers on responses
//     to allowed origins.
//   - ext_authz.go: source/extensions/filters/http/ext_authz/ext_authz.cc:
//     the ext_authz filter: its configuration, per-route enabling, body
//     buffering, and OK / Denied / Error as local replies or the request
//     going on.
//   - ext_authz_check.go: source/extensions/filters/common/ext_authz/
//     ext_authz_grpc_impl.cc (and ext_authz_http_impl.cc): the check: the
//     CheckRequest, the gRPC and HTTP clients, and the header mutations of
//     an OK answer under the mutation rules.
//   - route_config.go: source/common/router/config_impl.cc:
//     RouteConfiguration compiled: virtual hosts, routes, actions, weighted
//     clusters, per-filter configs; the request and response header
//     mutations and path rewrites of a selected route (finalizeRequestHeaders,
//     finalizeResponseHeaders); any error NACKs the response.
//   - route_match.go: source/common/router/config_impl.cc (RouteMatcher,
//     VirtualHostImpl::getRouteFromEntries, RouteEntryImplBase::matchRoute):
//     virtual host selection by domain, route matching on path, headers and
//     query parameters.
//   - header_parser.go: source/common/router/header_parser.cc: headers_to_add
//     and headers_to_remove, refusing host and ':'-prefixed names.
//   - router.go: source/common/router/router.cc (Router::Filter): the router
//     filter of one request: cluster choice, body buffering for retries and
//     mirrors, route timeout, circuit breaker, attempts and their outcome.
//   - retry_state.go: source/common/router/retry_state_impl.cc: which
//     failures and statuses are retried, and the jittered back-off between
//     attempts.
//   - shadow_writer.go: source/common/router/shadow_writer_impl.cc: request
//     mirroring, fire and forget, to the "-shadow" host.
//   - upstream_request.go: source/common/router/upstream_request.cc: one
//     upstream attempt, hop-by-hop headers, the response body's release and
//     trailers, and an accepted upgrade's byte tunnel.
//   - redirect.go: source/common/http/utility.cc (Utility::newUri,
//     processRequestHost): redirects and direct responses as local replies,
//     with the Location Envoy builds.
//   - local_reply.go: source/common/http/utility.cc (Utility::sendLocalReply):
//     local replies and the bodies Envoy writes in them.
//
// Upstreams:
//
//   - cluster.go: source/common/upstream/upstream_impl.cc (ClusterInfoImpl):
//     Cluster compiled: EDS over ADS, timeouts, keepalive, circuit breakers,
//     protocol options; and the healthy endpoints of an assignment. Any
//     error NACKs the response.
//   - client_context.go: source/common/tls/client_context_impl.cc: upstream
//     TLS: sni, ALPN, the server certificate verified against trusted_ca and
//     the subject alternative name matchers, the client certificate's SDS
//     name.
//   - lb_override_host.go: source/extensions/load_balancing_policies/
//     override_host/load_balancer.cc: the override_host policy compiled,
//     the host list read from the request's metadata and walked across
//     attempts, the round robin fallback, the selected host's metadata.
//   - conn_pool.go: source/common/http/conn_pool_base.cc: the per-cluster
//     connection pool (Go's transport, with the cluster's codec, TLS, connect
//     timeout and keepalive), its round robin, and the circuit breaker count.
//   - async_client_manager.go: source/common/grpc/async_client_manager_impl.cc:
//     the gRPC connection to an ext_proc or ext_authz cluster, cached per
//     cluster version, endpoint and authority.
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
//   - Warming (cluster_manager.go): a cluster whose initial fetch timed out gets no
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
//     and refuses (400) what depends on googleurl's version (path_utility.go);
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
// on every configuration change), never with sleeps. A test without an ADS
// server feeds resources with Apply (each as an accepted response) and
// calls Close when done; Validate gives the NACK a resource would get.
// The end-to-end tests that drive the stand-in with pilot's translation
// and ADS server live in tests/e2e.
package dataplane
