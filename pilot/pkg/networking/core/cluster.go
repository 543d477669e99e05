// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"sort"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	overridehostv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// clusterSpec is what the routes need of one cluster; several references
// to one name merge (a Service port's and a pool's protocol are what they
// declare, whichever routes use them).
type clusterSpec struct {
	name string
	// http2 forces HTTP/2 upstream (h2c, or h2 over TLS).
	http2 bool
	// negotiate has the HTTP version negotiated by ALPN (a Service port
	// that declares no protocol and has client TLS,
	// model.ServiceBackend.NegotiateHTTP): auto_config, when tls is set
	// and http2 is not.
	negotiate bool
	// overrideHost makes the cluster an InferencePool shadow Service
	// cluster: OverrideHost load balancing.
	overrideHost bool
	// raiseLimits sets Options.CircuitBreakers (inference and EPP clusters).
	raiseLimits bool
	// epp marks an Endpoint Picker cluster.
	epp bool
	// tls is the cluster's client TLS (ServiceBackend.TLS or
	// EPPBackend.TLS, from a BackendTLSPolicy or DestinationRule); nil
	// for plaintext.
	tls *UpstreamTLS
	// clientCert is the Gateway's client certificate for tls
	// (model.Gateway.BackendClientCertificate), "" for none (always for
	// an EPP).
	clientCert string
}

// clusterSpecs walks every rule of every route that attaches through some
// listener hostname and collects the clusters its backends and mirrors use
// (routeClusterOps, folded in order by applyClusterOp).
func clusterSpecs(gw *model.Gateway, opts Options) map[string]*clusterSpec {
	specs := map[string]*clusterSpec{}
	for _, l := range gw.Listeners {
		for _, f := range l.Filters {
			if p := f.Processor; p != nil {
				// An ExternalProcessor speaks ext_proc, as an EPP does.
				op := clusterOp{name: ProcessorClusterName(p), kind: opEPP, tls: p.TLS}
				s := specs[op.name]
				if s == nil {
					s = &clusterSpec{name: op.name}
					specs[op.name] = s
				}
				applyClusterOp(s, op, gw.BackendClientCertificate)
			}
		}
		for _, r := range l.Routes {
			for _, op := range routeClusterOps(l.Hostname, r, gw.Namespace, opts) {
				s := specs[op.name]
				if s == nil {
					s = &clusterSpec{name: op.name}
					specs[op.name] = s
				}
				applyClusterOp(s, op, gw.BackendClientCertificate)
			}
		}
	}
	return specs
}

// clusterOpKind is what one reference to a cluster says about it.
type clusterOpKind uint8

const (
	opService clusterOpKind = iota // a Service backendRef
	opPool                         // an InferencePool backendRef (its shadow Service)
	opEPP                          // the Endpoint Picker of a pool backendRef
	opMirror                       // a RequestMirror filter's Service
	opAuthz                        // an ExternalAuth filter's authorization server (a Service port)
)

// clusterOp is one reference of a route to a cluster, in the order the
// route's rules, backends and mirrors make them.
type clusterOp struct {
	name  string
	kind  clusterOpKind
	http2 bool
	// negotiate is the Service port's NegotiateHTTP (opService, opMirror,
	// opAuthz).
	negotiate bool
	tls       *UpstreamTLS // opService, opEPP, opMirror: the Service port's client TLS
}

// routeClusterOps are the cluster references of route r attached to a
// listener with hostname listenerHost, in a Gateway of namespace
// gatewayNamespace: none when the route serves no hostname through it;
// else, per rule, each valid backend (a pool's shadow cluster, then its
// EPP cluster), then each mirror that is sent (mirrorReachable), then
// each usable ExternalAuth filter's authorization server. A TLSRoute's or
// TCPRoute's valid Service backends count whether or not the route wins
// any connection of its port (StreamPortClaims), so that a route's
// clusters depend on the route alone.
func routeClusterOps(listenerHost string, r *model.Route, gatewayNamespace string, opts Options) []clusterOp {
	if len(routeHostnames(listenerHost, r.Hostnames)) == 0 {
		return nil
	}
	opts.gatewayNamespace = gatewayNamespace
	var ops []clusterOp
	for ri := range r.Rules {
		rule := &r.Rules[ri]
		if rule.Stream() {
			// A TLSRoute's or TCPRoute's rule: its valid Service backends
			// (tcpProxyFilter), clusters shared with any other route to the
			// same Service port.
			for bi := range rule.Backends {
				b := &rule.Backends[bi]
				if name, _, ok := backendCluster(b, false, opts); ok && b.Pool == nil {
					ops = append(ops, clusterOp{name: name, kind: opService, http2: b.Service.HTTP2, tls: b.Service.TLS})
				}
			}
			continue
		}
		if rule.HTTP == nil && rule.GRPC == nil {
			continue // not a rule; buildRule leaves it out
		}
		grpc := rule.GRPC != nil
		for bi := range rule.Backends {
			b := &rule.Backends[bi]
			name, epp, ok := backendCluster(b, grpc, opts)
			if !ok {
				continue
			}
			if b.Pool == nil {
				ops = append(ops, clusterOp{name: name, kind: opService, http2: b.Service.HTTP2, negotiate: b.Service.NegotiateHTTP, tls: b.Service.TLS})
				continue
			}
			ops = append(ops, clusterOp{name: name, kind: opPool, http2: b.Pool.HTTP2()},
				clusterOp{name: eppClusterName(epp), kind: opEPP, tls: epp.TLS})
		}
		for _, m := range ruleFiltersOf(rule).mirrors {
			if name, err := mirrorService(m.BackendRef, r.Namespace, opts.ClusterDomain); err == nil && mirrorReachable(rule, name, opts) {
				// The mirrored Service port's protocol (rule.Mirrors, which
				// the controller fills for every mirror it resolved); a
				// model without it (built by hand) has a GRPCRoute's mirror
				// in HTTP/2.
				op := clusterOp{name: name, kind: opMirror, http2: grpc}
				if sb := rule.Mirrors[name]; sb != nil {
					op.tls, op.http2, op.negotiate = sb.TLS, sb.HTTP2, sb.NegotiateHTTP
				}
				ops = append(ops, op)
			}
		}
		for _, ea := range rule.ExternalAuth {
			if extAuthzUsable(ea) {
				ops = append(ops, clusterOp{name: extAuthzCluster(ea), kind: opAuthz, http2: ea.Service.HTTP2,
					negotiate: ea.Service.NegotiateHTTP, tls: ea.Service.TLS})
			}
		}
	}
	return ops
}

// applyClusterOp folds one reference into the cluster's spec; clientCert
// is the Gateway's backend client certificate.
func applyClusterOp(s *clusterSpec, op clusterOp, clientCert string) {
	switch op.kind {
	case opService, opMirror:
		// The Service port's protocol and TLS, never the route's. A
		// GRPCRoute's mirrors reach the model only when their Service port
		// declares HTTP/2 or negotiates it (the controller resolves them as
		// backendRefs), so a mirror's protocol is the port's too.
		s.http2 = s.http2 || op.http2
		s.negotiate = s.negotiate || op.negotiate
		if s.tls == nil && op.tls != nil && !s.epp {
			s.tls, s.clientCert = op.tls, clientCert
		}
	case opPool:
		// The pool's own protocol, never the route's: its cluster is
		// shared by every route that uses it.
		s.overrideHost, s.raiseLimits, s.http2 = true, true, op.http2
	case opEPP:
		// The EPP speaks gRPC (ext_proc), which needs HTTP/2, whatever its
		// Service port's appProtocol says (http2, grpc and
		// kubernetes.io/h2c all mean it). It presents no client
		// certificate: it is reached with its own TLS, and a certificate
		// it did not ask for could fail its handshake.
		s.http2, s.raiseLimits, s.epp = true, true, true
		if s.tls == nil && op.tls != nil {
			s.tls = op.tls
		}
		s.clientCert = ""
	case opAuthz:
		// A Service port, exactly as for a backendRef (its protocol and TLS
		// are the port's): the cluster may be shared with routes that send
		// to the port, so nothing of the filter changes it (not even its
		// circuit breakers, left at Envoy's defaults).
		s.http2 = s.http2 || op.http2
		s.negotiate = s.negotiate || op.negotiate
		if s.tls == nil && op.tls != nil && !s.epp {
			s.tls, s.clientCert = op.tls, clientCert
		}
	}
}

// BuildClusters returns the clusters gw's routes use, sorted by name. All
// are EDS clusters (eds_config ADS, service_name = the cluster name
// outbound|<port>||<host>), with connect_timeout Options.ConnectTimeout.
//
//   - Service backends: plain round robin; HTTP/2 when the Service port
//     declares it (ServiceBackend.HTTP2), whichever routes use it: one
//     tenant's GRPCRoute never turns another tenant's HTTP/1.1 backend to
//     HTTP/2 (the controller refuses a GRPCRoute to a port that declares
//     no HTTP/2, as UnsupportedProtocol). A port that declares no
//     protocol and has client TLS (ServiceBackend.NegotiateHTTP) has the
//     HTTP version negotiated per connection: auto_config (below), ALPN
//     h2,http/1.1; its server decides, so an HTTPRoute's requests go
//     HTTP/2 when it offers h2 and a GRPCRoute's gRPC fails when it does
//     not, as in Envoy.
//   - InferencePool shadow Service (outbound|54321||<shadow host>):
//     load_balancing_policy envoy.load_balancing_policies.override_host
//     (OverrideHost: override_host_sources metadata envoy.lb /
//     x-gateway-destination-endpoint, selected_host_key envoy.lb /
//     x-gateway-destination-endpoint-served, fallback_policy round robin).
//     No header source: a client-sent x-gateway-destination-endpoint header
//     must not steer traffic. HTTP/2 exactly when the pool's appProtocol is
//     kubernetes.io/h2c: one cluster per pool, shared by every route that
//     uses it, so the protocol is the pool's, not a route's (a GRPCRoute
//     to a pool that is not h2c is answered 500, see backendCluster).
//     Circuit breakers raised.
//   - Endpoint Picker (outbound|<port>||<epp host>): always HTTP/2 (gRPC);
//     TLS when EPPBackend.TLS is set. Circuit breakers raised: under
//     FailOpen an overflowing EPP cluster would skip the EPP without an
//     error.
//   - Client TLS, on any of them whose Service port has it
//     (ServiceBackend.TLS, EPPBackend.TLS, Rule.Mirrors):
//     UpstreamTlsContext with sni, ALPN h2 on an HTTP/2 cluster (gRPC
//     servers refuse TLS without it), h2,http/1.1 on a negotiating one
//     (none on HTTP/1.1, Envoy's default),
//     and either a validation context (trusted_ca: the CA bundle the
//     Gateway has for it, model.UpstreamTLS.CAFor, or the system store when
//     none was named; the name: match_typed_subject_alt_names DNS exact
//     of SubjectAltNames, else of the SNI) or, with InsecureSkipVerify,
//     none. A cluster whose CA the Gateway cannot have is never built
//     (its backends are answered 500, backendCluster).
//
// HTTP/2 is set through typed_extension_protocol_options
// envoy.extensions.upstreams.http.v3.HttpProtocolOptions explicit_http_config;
// a negotiating cluster gets the same extension with auto_config
// (http_protocol_options and http2_protocol_options), and only with its
// TLS transport socket: Envoy refuses a cluster whose auto_config (its
// USE_ALPN feature) meets a transport socket that cannot do ALPN ("ALPN
// configured for cluster ... which has a non-ALPN transport socket",
// ClusterImplBase in source/common/upstream/upstream_impl.cc; the feature
// is set in source/extensions/upstreams/http/config.cc). Envoy would offer
// h2,http/1.1 by itself when the TLS context names no ALPN (the mixed
// connection pool's protocols as the TLS socket's ALPN fallback,
// wrapTransportSocketOptions in source/common/http/conn_pool_base.cc); the
// cluster names them so the offer is in the configuration. Envoy's mixed
// pool (source/common/http/mixed_conn_pool.cc, onConnected) then speaks
// HTTP/2 when h2 was negotiated and HTTP/1.1 otherwise, no ALPN answer
// included.
func BuildClusters(gw *model.Gateway, in Inputs, opts Options) ([]*clusterv3.Cluster, error) {
	opts = opts.WithDefaults()
	opts.gatewayNamespace = gw.Namespace
	specs := clusterSpecs(gw, opts)
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	packed, err := newPackedClusterConfig()
	if err != nil {
		return nil, err
	}
	out := make([]*clusterv3.Cluster, 0, len(names))
	for _, n := range names {
		c, err := buildCluster(specs[n], in, opts, packed)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// packedClusterConfig holds the Anys that are the same in every cluster
// that has them, marshalled once per BuildClusters call rather than once
// per cluster; each cluster gets its own Any sharing the bytes.
type packedClusterConfig struct {
	overrideHost *clusterv3.LoadBalancingPolicy
	http2        *anypb.Any
	autoHTTP     *anypb.Any
}

func newPackedClusterConfig() (packedClusterConfig, error) {
	oh, err := overrideHostPolicy()
	if err != nil {
		return packedClusterConfig{}, err
	}
	h2, err := toAny(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
		},
	}})
	if err != nil {
		return packedClusterConfig{}, err
	}
	auto, err := toAny(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_AutoConfig{
		AutoConfig: &httpv3.HttpProtocolOptions_AutoHttpConfig{
			HttpProtocolOptions:  &corev3.Http1ProtocolOptions{},
			Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
		},
	}})
	if err != nil {
		return packedClusterConfig{}, err
	}
	return packedClusterConfig{overrideHost: oh, http2: h2, autoHTTP: auto}, nil
}

// lbPolicy returns a new copy of the override_host load balancing policy.
func (p packedClusterConfig) lbPolicy() *clusterv3.LoadBalancingPolicy {
	tec := p.overrideHost.GetPolicies()[0].GetTypedExtensionConfig()
	return &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
		TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: tec.GetName(), TypedConfig: shareAny(tec.GetTypedConfig())},
	}}}
}

// shareAny is a new Any with a's type and (shared, read-only) bytes.
func shareAny(a *anypb.Any) *anypb.Any {
	return &anypb.Any{TypeUrl: a.GetTypeUrl(), Value: a.GetValue()}
}

func buildCluster(s *clusterSpec, in Inputs, opts Options, packed packedClusterConfig) (*clusterv3.Cluster, error) {
	c := &clusterv3.Cluster{
		Name:                 s.name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsConfigSource(), ServiceName: s.name},
		ConnectTimeout:       durationpb.New(opts.ConnectTimeout),
	}
	if s.overrideHost {
		c.LoadBalancingPolicy = packed.lbPolicy()
	}
	if s.raiseLimits {
		cb := opts.CircuitBreakers
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			Priority:           corev3.RoutingPriority_DEFAULT,
			MaxConnections:     wrapperspb.UInt32(cb.MaxConnections),
			MaxPendingRequests: wrapperspb.UInt32(cb.MaxPendingRequests),
			MaxRequests:        wrapperspb.UInt32(cb.MaxRequests),
		}}}
	}
	negotiate := s.negotiate && !s.http2 && s.tls != nil
	switch {
	case s.http2:
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{HTTPProtocolOptionsKey: shareAny(packed.http2)}
	case negotiate:
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{HTTPProtocolOptionsKey: shareAny(packed.autoHTTP)}
	}
	if s.tls != nil {
		// ALPN h2 only for an HTTP/2 port: a TLS server then needs it to
		// speak HTTP/2; h2,http/1.1 for a negotiating one (auto_config);
		// HTTP/1.1 upstreams get none, Envoy's default.
		var alpn []string
		switch {
		case s.http2:
			alpn = []string{ALPNH2}
		case negotiate:
			alpn = []string{ALPNH2, ALPNHTTP11}
		}
		ca, ok, problem := s.tls.CAFor(opts.gatewayNamespace)
		if !ok {
			// backendCluster keeps every reference to such a cluster out;
			// a cluster without its CA is an error, never plaintext.
			return nil, fmt.Errorf("cluster %s: no CA for its TLS: %s", s.name, problem)
		}
		ts, err := upstreamTransportSocket(s.tls.Host, s.tls, ca, alpn, opts.SystemCAFile, s.clientCert)
		if err != nil {
			return nil, err
		}
		c.TransportSocket = ts
		c.Metadata = configMetadata(s.tls.Source)
	}
	return c, nil
}

// configMetadata is a cluster's metadata naming the configuration that
// shaped it, as Istio writes it: filter_metadata "istio" {"config": path}
// (what istioctl proxy-config clusters shows as DESTINATION RULE). nil
// when path is empty. Envoy keeps Cluster.metadata for filters and logs
// and does not act on it (api/envoy/config/cluster/v3/cluster.proto,
// field metadata).
func configMetadata(path string) *corev3.Metadata {
	if path == "" {
		return nil
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"istio": {Fields: map[string]*structpb.Value{"config": structpb.NewStringValue(path)}},
	}}
}

// overrideHostPolicy is the shadow Service cluster's load_balancing_policy:
// the host the EPP picked (dynamic metadata envoy.lb /
// x-gateway-destination-endpoint, "ip:port" or a comma list walked by
// retries), recorded in envoy.lb / x-gateway-destination-endpoint-served;
// round robin when there is no pick or the picked host is not (yet) in the
// cluster's EDS endpoints.
func overrideHostPolicy() (*clusterv3.LoadBalancingPolicy, error) {
	rr, err := toAny(&roundrobinv3.RoundRobin{})
	if err != nil {
		return nil, err
	}
	oh, err := toAny(&overridehostv3.OverrideHost{
		OverrideHostSources: []*overridehostv3.OverrideHost_OverrideHostSource{{
			Metadata: &metadatav3.MetadataKey{Key: MetadataNamespaceLB, Path: []*metadatav3.MetadataKey_PathSegment{{
				Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: MetadataKeyDestination},
			}}},
		}},
		SelectedHostKey: &metadatav3.MetadataKey{Key: MetadataNamespaceLB, Path: []*metadatav3.MetadataKey_PathSegment{{
			Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: MetadataKeyServed},
		}}},
		FallbackPolicy: &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
			TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: LBPolicyRoundRobin, TypedConfig: rr},
		}}},
	})
	if err != nil {
		return nil, err
	}
	return &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
		TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: LBPolicyOverrideHost, TypedConfig: oh},
	}}}, nil
}

// upstreamTransportSocket is TLS towards an upstream (transport socket
// envoy.transport_sockets.tls, UpstreamTlsContext), offering alpn and
// presenting the client certificate of the SDS secret clientCert (a
// Secret key) when set. The server certificate is verified against ca
// (inline trusted_ca, the bundle t.CAFor gave) when given, not at all when
// InsecureSkipVerify, and otherwise against the proxy's system trust
// store, the file systemCA (trusted_ca.filename): what a DestinationRule
// in SIMPLE mode naming no CA and a BackendTLSPolicy with
// wellKnownCACertificates System both mean, and nothing else (a CA that
// was named but could not be read never reaches here).
//
// A verified certificate must also name the backend: Envoy checks only the
// chain unless the validation context has SAN matchers (source/common/tls/
// cert_validator/default_validator.cc; sni alone is never checked). The
// matchers are SubjectAltNames (DNS) and URISubjectAltNames (URI), any one
// of which passes, or the SNI sent when there are none, the
// name auto_san_validation would check against auto_sni's SNI in Istio; the
// EPP cluster cannot use auto_sni, whose SNI would be the gRPC stream's
// :authority, the cluster name.
func upstreamTransportSocket(host string, t *UpstreamTLS, ca []byte, alpn []string, systemCA, clientCert string) (*corev3.TransportSocket, error) {
	sni := t.SNI
	if sni == "" {
		sni = host
	}
	ctx := &tlsv3.UpstreamTlsContext{
		Sni:              sni,
		CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: alpn},
	}
	if clientCert != "" {
		// The same SDS secret as a listener certificate, fetched over ADS;
		// Envoy warms the cluster until it arrives.
		ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: SecretName(clientCert), SdsConfig: adsConfigSource()}}
	}
	if len(ca) > 0 || !t.InsecureSkipVerify {
		vc := &tlsv3.CertificateValidationContext{
			TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: ca}},
		}
		if len(ca) == 0 {
			vc.TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: systemCA}}
		}
		sans := t.SubjectAltNames
		if len(sans) == 0 && len(t.URISubjectAltNames) == 0 {
			sans = []string{sni}
		}
		for _, san := range sans {
			vc.MatchTypedSubjectAltNames = append(vc.MatchTypedSubjectAltNames, &tlsv3.SubjectAltNameMatcher{
				SanType: tlsv3.SubjectAltNameMatcher_DNS,
				Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: san}},
			})
		}
		for _, san := range t.URISubjectAltNames {
			vc.MatchTypedSubjectAltNames = append(vc.MatchTypedSubjectAltNames, &tlsv3.SubjectAltNameMatcher{
				SanType: tlsv3.SubjectAltNameMatcher_URI,
				Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: san}},
			})
		}
		ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
	}
	a, err := toAny(ctx)
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: TransportSocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}, nil
}
