// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"fmt"

	// Every message type an Any may carry must be linked in for unpacking;
	// the imports below are exactly the extension types this data plane
	// implements.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// allowedFields is every proto field (by full name) the data plane
// implements. A received resource with any other field set, at any depth,
// including inside google.protobuf.Any (typed_config, typed_per_filter_config,
// typed_extension_protocol_options), is NACKed naming the field. This list is
// the single place that says what the data plane obeys; a field goes in
// only together with the code that implements it. Values of enum fields are
// checked where they are compiled (config.go, route_config.go, route_match.go, cluster.go).
var allowedFields = fieldSet(
	// Listener (LDS): one plain-HTTP filter chain with the HCM.
	"envoy.config.listener.v3.Listener.name",
	"envoy.config.listener.v3.Listener.address",
	"envoy.config.listener.v3.Listener.filter_chains",
	"envoy.config.listener.v3.FilterChain.filters",
	"envoy.config.listener.v3.FilterChain.name",
	"envoy.config.listener.v3.Filter.name",
	"envoy.config.listener.v3.Filter.typed_config",
	// TLS listeners (tls.go): the TLS inspector, filter chains matched on
	// server_names, each terminating TLS with one SDS secret.
	"envoy.config.listener.v3.Listener.listener_filters",
	"envoy.config.listener.v3.ListenerFilter.name",
	"envoy.config.listener.v3.ListenerFilter.typed_config",
	"envoy.config.listener.v3.FilterChain.filter_chain_match",
	"envoy.config.listener.v3.FilterChain.transport_socket",
	"envoy.config.listener.v3.FilterChainMatch.server_names",
	"envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext.common_tls_context",
	// Client certificates on a listener (tls.go compileClientValidation):
	// trusted_ca (listed below for upstream TLS), require_client_certificate
	// and trust_chain_verification.
	"envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext.require_client_certificate",
	"envoy.extensions.transport_sockets.tls.v3.CertificateValidationContext.trust_chain_verification",
	"envoy.extensions.transport_sockets.tls.v3.CommonTlsContext.tls_certificate_sds_secret_configs",
	"envoy.extensions.transport_sockets.tls.v3.SdsSecretConfig.name",
	"envoy.extensions.transport_sockets.tls.v3.SdsSecretConfig.sds_config",
	// SDS secrets (tls.go compileSecret).
	"envoy.extensions.transport_sockets.tls.v3.Secret.name",
	"envoy.extensions.transport_sockets.tls.v3.Secret.tls_certificate",
	"envoy.extensions.transport_sockets.tls.v3.TlsCertificate.certificate_chain",
	"envoy.extensions.transport_sockets.tls.v3.TlsCertificate.private_key",
	// TCP proxy listeners (tcp_proxy.go): tcp_proxy with a cluster or
	// weighted clusters, behind the TLS listener fields above when TLS is
	// passed through or terminated.
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.stat_prefix",
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.cluster",
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.weighted_clusters",
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.WeightedCluster.clusters",
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.WeightedCluster.ClusterWeight.name",
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.WeightedCluster.ClusterWeight.weight",
	"envoy.config.core.v3.Address.socket_address",
	"envoy.config.core.v3.SocketAddress.address",
	"envoy.config.core.v3.SocketAddress.port_value",
	"envoy.config.core.v3.SocketAddress.protocol",

	// HTTP connection manager.
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.stat_prefix",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.codec_type",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.rds",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.strip_any_host_port",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.upgrade_configs",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.UpgradeConfig.upgrade_type",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.UpgradeConfig.enabled",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.use_remote_address",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.normalize_path",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.http_filters",
	"envoy.extensions.filters.network.http_connection_manager.v3.Rds.route_config_name",
	"envoy.extensions.filters.network.http_connection_manager.v3.Rds.config_source",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter.name",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter.typed_config",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter.disabled",
	// Early header mutations (handler.go compileEarlyMutations): header
	// removals only.
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.early_header_mutation_extensions",
	"envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation.mutations",
	"envoy.config.common.mutation_rules.v3.HeaderMutation.remove",
	"envoy.config.core.v3.ConfigSource.ads",
	"envoy.config.core.v3.ConfigSource.resource_api_version",
	"envoy.config.core.v3.ConfigSource.initial_fetch_timeout",

	// HTTP filters. Cors and Router have no fields we honour; any set field
	// of theirs is refused.
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.grpc_service",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.processing_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.failure_mode_allow",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.metadata_options",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.route_cache_action",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.message_timeout",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.send_body_without_waiting_for_header_response",
	// Header mutation rules (extproc/headers.go): the boolean rules; the
	// allow and disallow expressions are refused.
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.mutation_rules",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.allow_all_routing",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.allow_envoy",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.disallow_system",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.disallow_all",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.disallow_is_error",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.request_header_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.response_header_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.request_body_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.response_body_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.request_trailer_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.response_trailer_mode",
	"envoy.extensions.filters.http.ext_proc.v3.MetadataOptions.forwarding_namespaces",
	"envoy.extensions.filters.http.ext_proc.v3.MetadataOptions.receiving_namespaces",
	"envoy.extensions.filters.http.ext_proc.v3.MetadataOptions.MetadataNamespaces.untyped",
	// ext_authz (ext_authz.go, ext_authz_check.go): gRPC or HTTP service,
	// allowed headers, body, failure mode, mutation rules; per route,
	// disabled or empty check_settings.
	"envoy.extensions.filters.http.ext_authz.v3.ExtAuthz.grpc_service",
	"envoy.extensions.filters.http.ext_authz.v3.ExtAuthz.http_service",
	"envoy.extensions.filters.http.ext_authz.v3.ExtAuthz.transport_api_version",
	"envoy.extensions.filters.http.ext_authz.v3.ExtAuthz.failure_mode_allow",
	"envoy.extensions.filters.http.ext_authz.v3.ExtAuthz.status_on_error",
	"envoy.extensions.filters.http.ext_authz.v3.ExtAuthz.allowed_headers",
	"envoy.extensions.filters.http.ext_authz.v3.ExtAuthz.with_request_body",
	"envoy.extensions.filters.http.ext_authz.v3.ExtAuthz.decoder_header_mutation_rules",
	"envoy.extensions.filters.http.ext_authz.v3.BufferSettings.max_request_bytes",
	"envoy.extensions.filters.http.ext_authz.v3.BufferSettings.allow_partial_message",
	"envoy.extensions.filters.http.ext_authz.v3.BufferSettings.pack_as_bytes",
	"envoy.extensions.filters.http.ext_authz.v3.HttpService.server_uri",
	"envoy.extensions.filters.http.ext_authz.v3.HttpService.path_prefix",
	"envoy.extensions.filters.http.ext_authz.v3.HttpService.authorization_request",
	"envoy.extensions.filters.http.ext_authz.v3.HttpService.authorization_response",
	"envoy.extensions.filters.http.ext_authz.v3.AuthorizationRequest.allowed_headers",
	"envoy.extensions.filters.http.ext_authz.v3.AuthorizationResponse.allowed_upstream_headers",
	"envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute.disabled",
	"envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute.check_settings",
	"envoy.config.core.v3.HttpUri.uri",
	"envoy.config.core.v3.HttpUri.cluster",
	"envoy.config.core.v3.HttpUri.timeout",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.disallow_system",
	"envoy.type.v3.HttpStatus.code",
	"envoy.type.matcher.v3.ListStringMatcher.patterns",
	"envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute.disabled",
	"envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute.overrides",
	"envoy.extensions.filters.http.ext_proc.v3.ExtProcOverrides.processing_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ExtProcOverrides.grpc_service",
	"envoy.extensions.filters.http.ext_proc.v3.ExtProcOverrides.failure_mode_allow",
	"envoy.config.core.v3.GrpcService.envoy_grpc",
	"envoy.config.core.v3.GrpcService.timeout",
	"envoy.config.core.v3.GrpcService.EnvoyGrpc.cluster_name",
	"envoy.config.core.v3.GrpcService.EnvoyGrpc.authority",
	"envoy.extensions.filters.http.cors.v3.CorsPolicy.allow_origin_string_match",
	"envoy.extensions.filters.http.cors.v3.CorsPolicy.allow_methods",
	"envoy.extensions.filters.http.cors.v3.CorsPolicy.allow_headers",
	"envoy.extensions.filters.http.cors.v3.CorsPolicy.expose_headers",
	"envoy.extensions.filters.http.cors.v3.CorsPolicy.max_age",
	"envoy.extensions.filters.http.cors.v3.CorsPolicy.allow_credentials",
	"envoy.extensions.filters.http.cors.v3.CorsPolicy.forward_not_matching_preflights",

	// RouteConfiguration (RDS).
	"envoy.config.route.v3.RouteConfiguration.name",
	"envoy.config.route.v3.RouteConfiguration.virtual_hosts",
	"envoy.config.route.v3.RouteConfiguration.validate_clusters",
	"envoy.config.route.v3.RouteConfiguration.ignore_port_in_host_matching",
	"envoy.config.route.v3.VirtualHost.name",
	"envoy.config.route.v3.VirtualHost.domains",
	"envoy.config.route.v3.VirtualHost.routes",
	// Per-filter configuration of a virtual host: ext_proc only (route.go
	// compilePerFilter).
	"envoy.config.route.v3.VirtualHost.typed_per_filter_config",
	"envoy.config.route.v3.Route.name",
	"envoy.config.route.v3.Route.match",
	"envoy.config.route.v3.Route.route",
	"envoy.config.route.v3.Route.redirect",
	"envoy.config.route.v3.Route.direct_response",
	"envoy.config.route.v3.Route.typed_per_filter_config",
	"envoy.config.route.v3.Route.request_headers_to_add",
	"envoy.config.route.v3.Route.request_headers_to_remove",
	"envoy.config.route.v3.Route.response_headers_to_add",
	"envoy.config.route.v3.Route.response_headers_to_remove",
	"envoy.config.route.v3.RouteMatch.prefix",
	"envoy.config.route.v3.RouteMatch.path",
	"envoy.config.route.v3.RouteMatch.safe_regex",
	"envoy.config.route.v3.RouteMatch.path_separated_prefix",
	"envoy.config.route.v3.RouteMatch.headers",
	"envoy.config.route.v3.RouteMatch.query_parameters",
	"envoy.config.route.v3.HeaderMatcher.name",
	"envoy.config.route.v3.HeaderMatcher.string_match",
	"envoy.config.route.v3.HeaderMatcher.present_match",
	"envoy.config.route.v3.HeaderMatcher.invert_match",
	"envoy.config.route.v3.QueryParameterMatcher.name",
	"envoy.config.route.v3.QueryParameterMatcher.string_match",
	"envoy.config.route.v3.QueryParameterMatcher.present_match",
	"envoy.type.matcher.v3.StringMatcher.exact",
	"envoy.type.matcher.v3.StringMatcher.prefix",
	"envoy.type.matcher.v3.StringMatcher.suffix",
	"envoy.type.matcher.v3.StringMatcher.contains",
	"envoy.type.matcher.v3.StringMatcher.safe_regex",
	"envoy.type.matcher.v3.StringMatcher.ignore_case",
	"envoy.type.matcher.v3.RegexMatcher.regex",
	"envoy.type.matcher.v3.RegexMatchAndSubstitute.pattern",
	"envoy.type.matcher.v3.RegexMatchAndSubstitute.substitution",
	"envoy.config.route.v3.RouteAction.cluster",
	"envoy.config.route.v3.RouteAction.weighted_clusters",
	"envoy.config.route.v3.RouteAction.cluster_not_found_response_code",
	"envoy.config.route.v3.RouteAction.prefix_rewrite",
	"envoy.config.route.v3.RouteAction.regex_rewrite",
	"envoy.config.route.v3.RouteAction.host_rewrite_literal",
	"envoy.config.route.v3.RouteAction.timeout",
	"envoy.config.route.v3.RouteAction.max_stream_duration",
	"envoy.config.route.v3.RouteAction.MaxStreamDuration.max_stream_duration",
	"envoy.config.route.v3.RouteAction.retry_policy",
	"envoy.config.route.v3.RouteAction.request_mirror_policies",
	"envoy.config.route.v3.RouteAction.RequestMirrorPolicy.cluster",
	"envoy.config.route.v3.RouteAction.RequestMirrorPolicy.runtime_fraction",
	"envoy.config.core.v3.RuntimeFractionalPercent.default_value",
	"envoy.type.v3.FractionalPercent.numerator",
	"envoy.type.v3.FractionalPercent.denominator",
	"envoy.config.route.v3.RetryPolicy.retry_on",
	"envoy.config.route.v3.RetryPolicy.num_retries",
	"envoy.config.route.v3.RetryPolicy.retriable_status_codes",
	"envoy.config.route.v3.RetryPolicy.per_try_timeout",
	"envoy.config.route.v3.RetryPolicy.retry_back_off",
	"envoy.config.route.v3.RetryPolicy.RetryBackOff.base_interval",
	"envoy.config.route.v3.RetryPolicy.RetryBackOff.max_interval",
	"envoy.config.route.v3.WeightedCluster.clusters",
	"envoy.config.route.v3.WeightedCluster.ClusterWeight.name",
	"envoy.config.route.v3.WeightedCluster.ClusterWeight.weight",
	"envoy.config.route.v3.WeightedCluster.ClusterWeight.typed_per_filter_config",
	"envoy.config.route.v3.WeightedCluster.ClusterWeight.host_rewrite_literal",
	"envoy.config.route.v3.WeightedCluster.ClusterWeight.request_headers_to_add",
	"envoy.config.route.v3.WeightedCluster.ClusterWeight.request_headers_to_remove",
	"envoy.config.route.v3.WeightedCluster.ClusterWeight.response_headers_to_add",
	"envoy.config.route.v3.WeightedCluster.ClusterWeight.response_headers_to_remove",
	"envoy.config.route.v3.RedirectAction.scheme_redirect",
	"envoy.config.route.v3.RedirectAction.host_redirect",
	"envoy.config.route.v3.RedirectAction.port_redirect",
	"envoy.config.route.v3.RedirectAction.path_redirect",
	"envoy.config.route.v3.RedirectAction.prefix_rewrite",
	"envoy.config.route.v3.RedirectAction.regex_rewrite",
	"envoy.config.route.v3.RedirectAction.response_code",
	"envoy.config.route.v3.DirectResponseAction.status",
	"envoy.config.route.v3.DirectResponseAction.body",
	"envoy.config.core.v3.DataSource.inline_string",
	"envoy.config.core.v3.DataSource.inline_bytes",
	"envoy.config.core.v3.DataSource.filename",
	"envoy.config.core.v3.HeaderValueOption.header",
	"envoy.config.core.v3.HeaderValueOption.append_action",
	"envoy.config.core.v3.HeaderValue.key",
	"envoy.config.core.v3.HeaderValue.value",

	// Cluster (CDS): EDS only.
	"envoy.config.cluster.v3.Cluster.name",
	"envoy.config.cluster.v3.Cluster.type",
	"envoy.config.cluster.v3.Cluster.eds_cluster_config",
	"envoy.config.cluster.v3.Cluster.connect_timeout",
	"envoy.config.cluster.v3.Cluster.lb_policy",
	"envoy.config.cluster.v3.Cluster.load_balancing_policy",
	"envoy.config.cluster.v3.Cluster.circuit_breakers",
	"envoy.config.cluster.v3.Cluster.typed_extension_protocol_options",
	"envoy.config.cluster.v3.Cluster.transport_socket",
	// Cluster.metadata: Envoy stores it for filters, access logs and stats
	// and takes no routing decision from it
	// (api/envoy/config/cluster/v3/cluster.proto, field metadata: "The
	// Metadata field can be used to provide additional information about
	// the cluster. It can be used for stats, logging, and varying filter
	// behavior."). The control plane writes Istio's istio.config there
	// (the configuration that shaped the cluster, for istioctl's DESTINATION
	// RULE column); this data plane has nothing to do with it but accept it.
	"envoy.config.cluster.v3.Cluster.metadata",
	"envoy.config.core.v3.Metadata.filter_metadata",
	"envoy.config.cluster.v3.Cluster.EdsClusterConfig.eds_config",
	"envoy.config.cluster.v3.Cluster.EdsClusterConfig.service_name",
	"envoy.config.cluster.v3.LoadBalancingPolicy.policies",
	"envoy.config.cluster.v3.LoadBalancingPolicy.Policy.typed_extension_config",
	"envoy.config.core.v3.TypedExtensionConfig.name",
	"envoy.config.core.v3.TypedExtensionConfig.typed_config",
	"envoy.config.cluster.v3.CircuitBreakers.thresholds",
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.priority",
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_connections",
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_pending_requests",
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_requests",
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_retries",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.explicit_http_config",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.ExplicitHttpConfig.http_protocol_options",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.ExplicitHttpConfig.http2_protocol_options",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.auto_config",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.AutoHttpConfig.http_protocol_options",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.AutoHttpConfig.http2_protocol_options",
	"envoy.config.core.v3.TransportSocket.name",
	"envoy.config.core.v3.TransportSocket.typed_config",
	"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext.sni",
	"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext.common_tls_context",
	"envoy.extensions.transport_sockets.tls.v3.CommonTlsContext.alpn_protocols",
	"envoy.extensions.transport_sockets.tls.v3.CommonTlsContext.validation_context",
	"envoy.extensions.transport_sockets.tls.v3.CertificateValidationContext.trusted_ca",
	"envoy.extensions.transport_sockets.tls.v3.CertificateValidationContext.match_typed_subject_alt_names",
	"envoy.extensions.transport_sockets.tls.v3.SubjectAltNameMatcher.san_type",
	"envoy.extensions.transport_sockets.tls.v3.SubjectAltNameMatcher.matcher",
	"envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost.override_host_sources",
	"envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost.selected_host_key",
	"envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost.fallback_policy",
	"envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost.OverrideHostSource.metadata",
	"envoy.type.metadata.v3.MetadataKey.key",
	"envoy.type.metadata.v3.MetadataKey.path",
	"envoy.type.metadata.v3.MetadataKey.PathSegment.key",

	// ClusterLoadAssignment (EDS).
	"envoy.config.endpoint.v3.ClusterLoadAssignment.cluster_name",
	"envoy.config.endpoint.v3.ClusterLoadAssignment.endpoints",
	"envoy.config.endpoint.v3.LocalityLbEndpoints.lb_endpoints",
	"envoy.config.endpoint.v3.LbEndpoint.endpoint",
	"envoy.config.endpoint.v3.LbEndpoint.health_status",
	"envoy.config.endpoint.v3.Endpoint.address",
)

// opaqueMessages are message types whose content is data, not
// configuration (google.protobuf.Struct, wrappers, Duration): once the field
// holding them is allowed, everything inside is.
var opaqueMessages = map[protoreflect.FullName]bool{
	"google.protobuf.Duration":    true,
	"google.protobuf.BoolValue":   true,
	"google.protobuf.UInt32Value": true,
	"google.protobuf.Struct":      true,
	"google.protobuf.Empty":       true,
}

func fieldSet(names ...string) map[protoreflect.FullName]bool {
	m := make(map[protoreflect.FullName]bool, len(names))
	for _, n := range names {
		m[protoreflect.FullName(n)] = true
	}
	return m
}

// UnimplementedFieldError is a set field the data plane does not implement.
type UnimplementedFieldError struct {
	// Field is the proto field's full name, e.g.
	// envoy.config.route.v3.RetryPolicy.per_try_timeout, or for an Any of
	// an unknown type, the Any's type URL.
	Field string
	// Path is where in the resource it was found.
	Path string
}

func (e *UnimplementedFieldError) Error() string {
	return fmt.Sprintf("unimplemented field %s (at %s)", e.Field, e.Path)
}

// checkImplemented walks every set field of m, recursing into messages,
// lists, maps and Anys, and returns an *UnimplementedFieldError for the
// first one not in allowedFields. Unknown fields (bytes the Go types do not
// know) are refused as well.
func checkImplemented(m proto.Message) error {
	return checkImplementedIn(m, allowedFields)
}

// checkImplementedIn is checkImplemented against the field set allowed.
func checkImplementedIn(m proto.Message, allowed map[protoreflect.FullName]bool) error {
	return walk(m.ProtoReflect(), string(m.ProtoReflect().Descriptor().Name()), allowed, 0)
}

// maxDepth bounds the recursion; Envoy resources are far shallower.
const maxDepth = 64

func walk(m protoreflect.Message, path string, allowed map[protoreflect.FullName]bool, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: nesting deeper than %d", path, maxDepth)
	}
	desc := m.Descriptor()
	if opaqueMessages[desc.FullName()] {
		return nil
	}
	if len(m.GetUnknown()) > 0 {
		return &UnimplementedFieldError{Field: string(desc.FullName()) + ".<unknown field>", Path: path}
	}
	if desc.FullName() == "google.protobuf.Any" {
		a := m.Interface().(*anypb.Any)
		inner, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes})
		if err != nil {
			return &UnimplementedFieldError{Field: a.GetTypeUrl(), Path: path}
		}
		return walk(inner.ProtoReflect(), path+"<"+string(inner.ProtoReflect().Descriptor().FullName())+">", allowed, depth+1)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		if !allowed[fd.FullName()] {
			err = &UnimplementedFieldError{Field: string(fd.FullName()), Path: p}
			return false
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = walk(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i), allowed, depth+1)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = walk(mv.Message(), fmt.Sprintf("%s[%q]", p, k.String()), allowed, depth+1)
				return err == nil
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			err = walk(v.Message(), p, allowed, depth+1)
		}
		return err == nil
	})
	return err
}
