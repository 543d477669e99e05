// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package xds serves each Gateway's Envoy its configuration over ADS
// (envoy.service.discovery.v3.AggregatedDiscoveryService), in both the
// state-of-the-world (StreamAggregatedResources) and the incremental
// (DeltaAggregatedResources) variants, on go-control-plane's stream servers
// with a cache of our own.
//
// # Inputs and outputs
//
// Inputs are three krt collections: model.Gateway per Gateway (from the
// controller, client TLS of every upstream included), model.ClusterEndpoints
// per EDS cluster (from the service registry), and the Kubernetes Secrets
// (HTTPS listeners' certificates). Outputs are LDS, RDS, CDS, EDS
// and SDS resources on the gRPC port, and the debug endpoints of
// Server.Handler (/debug/config_dump, /debug/syncz, /debug/krtz, /metrics,
// /ready, /healthz/config), and per Gateway what of its translation is not
// served as translated (Config.Serving, model.GatewayServing).
//
// # Pipeline
//
//  1. resources.go: two derived krt collections. GatewayResources per
//     Gateway: listeners, route configurations and clusters from the
//     pilot/pkg/networking/core builders, plus the EDS names its clusters
//     use; it fetches nothing else. EndpointResources per cluster: the
//     ClusterLoadAssignment (core.BuildClusterLoadAssignment). krt reruns a
//     transformation only when its input or something it fetched changed,
//     so an endpoint change rebuilds one assignment and no Gateway.
//  2. pusher.go: the push path. Events mark Gateways and clusters dirty; a
//     debounced push (debounce.go) validates each changed set with
//     core.Validate (every resource's ValidateAll, including packed Anys;
//     unique names; every RDS name in LDS; every route and ext_proc cluster
//     in CDS; a ClusterLoadAssignment for every EDS cluster), serializes
//     each resource once (entry.go) and publishes to the cache. A Gateway
//     set that fails is served in part (core.ValidSubset): every valid
//     part, the last good version of an invalid one, else nothing, and
//     nothing that would dangle; each refused part is logged and the set
//     counted in infermesh_xds_rejected_total. A set that cannot be served
//     at all (translation failed; an invalid EDS assignment) is not
//     published: proxies keep the last good version. serving.go records
//     what was refused per Gateway, shown in /debug/syncz (refused), the
//     gauge infermesh_xds_gateway_invalid_resources{gateway} and
//     /healthz/config, and handed to Config.Serving (a ServingSink), which
//     the controller's Gateway status reads (Programmed=False/Invalid).
//  3. cache.go, respond.go: the Cache (go-control-plane cache.Cache) parks
//     each request until it has something the stream lacks, then writes one
//     response built from the shared serialized entries; sharedset.go and
//     streams.go make an EDS or SDS change cost what changed.
//  4. server.go: Server.Run wires the above and serves gRPC; syncz.go
//     records per stream (stream id and peer address) what was sent, acked
//     and nacked; truncate.go bounds the NACK messages it keeps and logs.
//
// # Proxies and Gateways
//
// A proxy names its Gateway in its node metadata (Node.metadata, string
// fields): GATEWAY_NAMESPACE and GATEWAY_NAME. A request without both ends
// the stream with InvalidArgument. node.id is free-form and only reported.
// A proxy whose Gateway has no published configuration (not yet translated,
// never valid, or deleted) gets nothing and waits; a deleted Gateway's
// proxies keep their last configuration rather than receiving an empty one.
//
// version.go holds the Envoy version floor (EnvoyVersionFloor, 1.38.0: the
// first Envoy with OverrideHost.selected_host_key). A node whose
// user_agent_name is "envoy" and whose user_agent_build_version is older,
// or absent, is served anyway (an older Envoy ignores the field and only
// the served-endpoint report to the EPP is lost), logged once per stream at
// WARN, counted in infermesh_xds_proxies_below_version_floor{gateway} while
// its stream is open, and marked in /debug/syncz. Other user agents (and
// none) are not held to the floor.
//
// # Versions
//
// A resource's version is the 64-bit xxhash of its deterministic
// serialization (16 hex digits); a route configuration's is made from its
// parts, the hashes of its virtual hosts kept beside their bytes
// (routeversion.go), so that a change to one of 10,000 virtual hosts does
// not hash the other 3.5 MB. Either way equal content has equal versions,
// also across restarts. A response's version_info (SotW) or
// system_version_info (delta) is, for LDS, CDS and RDS, a hash of the names
// and versions of everything the stream's subscription covers; for EDS and
// SDS it is the Gateway's set version (sharedset.go): the sum, modulo 2^64,
// of the xxhash of each name and version (under its warm key) of everything
// the Gateway has of the type, whatever the subscription. A sum is kept per
// change, and equal sets have equal versions, also across restarts. The
// cache records, through the subscription's returned resources, the version
// of every resource it sent on the stream (for EDS and RDS joined with a
// warm key, see Re-warming below).
//
// # When a request is answered
//
//   - Nothing is answered before the first publish, which happens only once
//     every input collection, derived collection and event handler has
//     synced: a proxy (re)connecting early waits and never gets an empty or
//     partial configuration.
//   - SotW LDS and CDS: the full set, when it differs from what the stream
//     was last sent, and always on the stream's first request of the type.
//   - SotW EDS and RDS: only the resources whose version differs from what
//     the stream was sent. The xDS protocol allows this for every type but
//     Listener and Cluster ("Grouping Resources into Responses"): the client
//     keeps resources a response leaves out. So an endpoint change sends one
//     ClusterLoadAssignment, not every subscribed one.
//   - Delta: the changed resources and, in removed_resources, the names the
//     stream holds that no longer exist; the first request of a type is
//     always answered, possibly empty.
//   - Re-warming (warming.go): when a publish changes the version of a
//     Gateway's EDS cluster that already existed (any change: a
//     DestinationRule or BackendTLSPolicy on an EPP, a pool's protocol),
//     Envoy replaces the cluster by a new one that waits for a
//     ClusterLoadAssignment sent after it, and asks for nothing new (SotW:
//     a request that looks like an ACK; delta: no request). So the
//     cluster's assignment is sent again on every stream of that Gateway,
//     SotW and delta, after the CDS response and even if unchanged. Likewise
//     a route configuration is sent again when the Rds message of an HCM
//     that names it changes (Envoy keys RDS subscriptions by that message).
//     The rule is stateless: the version a stream records for an EDS or RDS
//     resource is its own version joined with a key of its clusters' (or
//     Rds messages') versions, so such a change makes the resource differ
//     from what every stream holds.
//   - A NACK (error_detail set on the request answering our latest nonce) is
//     logged with node, Gateway, type, version and error, counted in
//     infermesh_xds_nacks_total{type}, and not answered: the rejected
//     version is exactly what the stream was last sent, so the watch parks
//     until a different version exists.
//   - EDS and SDS cost what changed (sharedset.go, streams.go): a publish
//     answers a watch whose stream held everything desired from the names
//     it changed for the watch's Gateway, and a request that only
//     acknowledges a response (same returned map, same subscription, no
//     change since) parks without comparing a name. The stream callbacks
//     tell the cache which stream each request comes from; the cache keeps
//     the map of what each stream holds and updates it in place when the
//     stream takes a response, rather than copying it per response.
//   - When one publish changes several types, responses go out in the order
//     CDS, EDS, LDS, RDS, SDS (ordered ADS), so clusters exist before routes
//     use them.
//   - SDS (pusher.pushSecret, Cache.desired): a Gateway's snapshot lists
//     the SDS names its served listeners fetch (core.SecretNames); the
//     secret of each (core.BuildSecret over the Secret) is serialized once
//     and shared like an assignment, and a proxy gets only the names its
//     own Gateway lists, whatever it subscribes to. Only Secrets some
//     Gateway names are read and serialized. A Secret's change sends only
//     the new secret to the SDS watches of the Gateways that name it: the
//     listener does not change, so Envoy does not drain it. A Secret that
//     is missing or invalid is not served (logged without its data).
//     /debug/config_dump shows secrets with private keys redacted as
//     Envoy's admin redacts them (redact.go).
//
// # Push timing
//
// A change after Config.Debounce without a push is pushed at once. Changes
// that follow a push more closely are coalesced until Debounce passes
// without a change, and never delayed more than Config.MaxDelay.
//
// # Rules for callers
//
// Collections handed in are not modified by this package; their objects
// must not be modified by anyone once handed in (krt's rule). Server.Run is
// called once and stops everything it started when its context is done.
//
// # Files
//
// Translation and push:
//
//   - resources.go: GatewayResources and EndpointResources, the two derived
//     collections (GatewayBuilder with one core.Translator per Gateway,
//     EndpointBuilder), and the comparisons that keep an unchanged output
//     silent.
//   - pusher.go: the push path: dirty Gateways and EDS clusters, validation
//     (core.SetValidator, core.ValidSubset when a set fails), and the publish
//     to the cache.
//   - debounce.go: debouncer, pushes at once when idle, coalesced up to
//     Debounce and MaxDelay otherwise.
//   - encode.go: gatewayEncoding, the last served set kept so that a new set
//     serializes only what changed (route configurations from their virtual
//     hosts' bytes).
//   - entry.go: the five kinds in response order, entry (one resource
//     serialized once for every stream), and set versions.
//   - routeversion.go: a route configuration's version from its parts, its
//     virtual hosts' hashes kept beside their bytes.
//   - warming.go: warm keys: an EDS or RDS resource sent again when Envoy
//     re-warms the cluster or HCM that uses it.
//   - serving.go: ServingSink and the record of what was refused per Gateway.
//
// The cache and responses:
//
//   - cache.go: Cache, go-control-plane's cache.Cache: per-Gateway snapshots,
//     parked watches answered on publish, and REST Fetch.
//   - respond.go: what a watch gets (fullPlan, changedPlan) and the SotW and
//     delta responses over shared entries.
//   - sharedset.go: the per-Gateway sets of EDS and SDS names and their set
//     versions, updated by what a publish changed.
//   - streams.go: what each stream holds of EDS and SDS, so an acknowledgement
//     parks without comparing names; the stream callbacks that feed it.
//   - node.go: gatewayOf, the Gateway a node's metadata names.
//   - version.go: the Envoy version floor and what a node's user agent and
//     build version make of it.
//
// Serving, and seeing what is served:
//
//   - server.go: Config, Server, NewServer and Run: the collections, the push
//     path and the gRPC ADS services wired together.
//   - syncz.go: tracker: per stream what was sent, acked and nacked, for
//     /debug/syncz and the NACK log and metric.
//   - truncate.go: the bound on the NACK messages kept and logged.
//   - debug.go: Server.Handler: /debug/config_dump, /debug/syncz,
//     /healthz/config and the rest, and ConfigDump.
//   - redact.go: Redact, secret material removed from a config dump as Envoy's
//     admin removes it.
//   - metrics.go: the server's Prometheus metrics.
package xds
