// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"strconv"
)

// Names of Envoy extensions and well-known keys this package emits.
const (
	// FilterExtProc is the ext_proc HTTP filter name, also the key of its
	// per-route configuration in typed_per_filter_config.
	FilterExtProc = "envoy.filters.http.ext_proc"
	// FilterCORS is the CORS HTTP filter name and typed_per_filter_config key.
	FilterCORS = "envoy.filters.http.cors"
	// FilterRouter is the terminal router filter.
	FilterRouter = "envoy.filters.http.router"
	// NetworkFilterHCM is the HTTP connection manager network filter.
	NetworkFilterHCM = "envoy.filters.network.http_connection_manager"

	// LBPolicyOverrideHost is the load balancing policy extension that sends a
	// request to the host named in its metadata (the EPP's pick).
	LBPolicyOverrideHost = "envoy.load_balancing_policies.override_host"
	// LBPolicyRoundRobin is OverrideHost's fallback when no host was picked
	// or the picked host is not in the cluster.
	LBPolicyRoundRobin = "envoy.load_balancing_policies.round_robin"

	// HTTPProtocolOptionsKey is the typed_extension_protocol_options key of
	// envoy.extensions.upstreams.http.v3.HttpProtocolOptions.
	HTTPProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	// TransportSocketTLS is the upstream/downstream TLS transport socket.
	TransportSocketTLS = "envoy.transport_sockets.tls"
	// ALPNH2 and ALPNHTTP11 are the ALPN protocol IDs of HTTP/2 over TLS
	// and HTTP/1.1 (RFC 7301, RFC 9113).
	ALPNH2     = "h2"
	ALPNHTTP11 = "http/1.1"

	// MetadataNamespaceLB is the dynamic metadata namespace of the Endpoint
	// Picker protocol (GIE EPP protocol, version 1).
	MetadataNamespaceLB = "envoy.lb"
	// MetadataKeyDestination is the key under MetadataNamespaceLB where the
	// EPP puts its pick ("ip:port" or an ordered comma list).
	MetadataKeyDestination = "x-gateway-destination-endpoint"
	// MetadataKeyServed is the key under MetadataNamespaceLB where Envoy
	// records the endpoint that served the request.
	MetadataKeyServed = "x-gateway-destination-endpoint-served"

	// ExtProcPlaceholderCluster is the gRPC target of the listener-level
	// ext_proc filter. That filter is disabled and sends nothing, so Envoy
	// never opens a stream to it; every route that enables the filter
	// overrides the target with its pool's EPP cluster. No cluster of this
	// name exists in CDS, and Validate knows to ignore it.
	ExtProcPlaceholderCluster = "infermesh|ext_proc|unused"
	// InvalidBackendCluster is the weighted-cluster name used for the share
	// of an invalid backendRef when a rule also has valid ones. No such
	// cluster exists; the route sets cluster_not_found_response_code
	// INTERNAL_SERVER_ERROR so that share gets HTTP 500, as the Gateway API
	// requires. Validate knows to ignore it.
	InvalidBackendCluster = "infermesh|invalid-backend"
)

// ClusterName is Envoy's cluster name for a Service port, as Istio spells it:
// outbound|<port>||<host>. The same string is the EDS service name.
func ClusterName(port uint32, host string) string {
	return fmt.Sprintf("outbound|%d||%s", port, host)
}

// RouteConfigName is the RDS name of a listener port: "http.<port>", or
// "https.<port>" for a TLS-terminating port.
func RouteConfigName(port uint32, tls bool) string {
	if tls {
		return "https." + strconv.FormatUint(uint64(port), 10)
	}
	return "http." + strconv.FormatUint(uint64(port), 10)
}

// ChainRouteConfigName is the RDS name of one HTTPS filter chain, the
// chain of Gateway listener listenerName on port: "https.<port>.<name>".
// Each HTTPS chain has its own route configuration, so that a request
// whose Host belongs to another listener than the one its TLS server name
// chose is answered 421 (misdirectedVirtualHost).
func ChainRouteConfigName(port uint32, listenerName string) string {
	return RouteConfigName(port, true) + "." + listenerName
}

// ListenerName is the LDS name of a listener port: "0.0.0.0_<port>".
func ListenerName(port uint32) string {
	return "0.0.0.0_" + strconv.FormatUint(uint64(port), 10)
}
