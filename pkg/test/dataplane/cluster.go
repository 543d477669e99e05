// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	overridehostv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
)

// Extension names of clusters.
const (
	lbOverrideHost       = "envoy.load_balancing_policies.override_host"
	lbRoundRobin         = "envoy.load_balancing_policies.round_robin"
	httpProtocolOptions  = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	transportSocketTLS   = "envoy.transport_sockets.tls"
	defaultCircuitLimit  = 1024 // Envoy's default for every threshold
	defaultMaxRetries    = 3    // Envoy's default max_retries threshold
	defaultConnectTimout = 5 * time.Second
	// defaultInitialFetchTimeout is Envoy's when ConfigSource sets none
	// (Config::Utility::configSourceInitialFetchTimeout).
	defaultInitialFetchTimeout = 15 * time.Second
)

// clusterConfig is a compiled envoy.config.cluster.v3.Cluster: EDS from
// CDS, or STATIC / STRICT_DNS from the bootstrap (static.go).
type clusterConfig struct {
	name           string
	edsName        string
	connectTimeout time.Duration
	// initialFetchTimeout is eds_config.initial_fetch_timeout (0: none).
	initialFetchTimeout time.Duration
	http2               bool
	// negotiate is HttpProtocolOptions auto_config: the HTTP version is
	// chosen per connection by ALPN (compileAutoConfig).
	negotiate bool
	tls       *tls.Config // nil: plaintext
	// clientCertSDS is the SDS secret whose certificate the upstream TLS
	// presents (tls_certificate_sds_secret_configs); "" for none. The
	// cluster warms until it has arrived (activeClusterLocked).
	clientCertSDS  string
	maxConnections uint32
	maxPending     uint32
	maxRequests    uint32
	maxRetries     uint32
	overrideHost   *overrideHostPolicy
	// tcpKeepalive is upstream_connection_options.tcp_keepalive (bootstrap
	// clusters only); nil leaves Go's default.
	tcpKeepalive *net.KeepAliveConfig
}

// overrideHostPolicy is OverrideHost with metadata sources and a round
// robin fallback.
type overrideHostPolicy struct {
	sources  []metadataPath
	selected *metadataPath
}

// metadataPath is an envoy.type.metadata.v3.MetadataKey: a dynamic
// metadata namespace and a path of struct keys inside it.
type metadataPath struct {
	namespace string
	path      []string
}

// compileCluster compiles a cluster received over CDS: EDS over ADS only.
func compileCluster(c *clusterv3.Cluster) (*clusterConfig, error) {
	if c.GetType() != clusterv3.Cluster_EDS {
		return nil, fmt.Errorf("cluster type %v not implemented (EDS only)", c.GetType())
	}
	if c.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil {
		return nil, errors.New("eds_cluster_config.eds_config must be ADS")
	}
	cc, err := compileClusterCommon(c)
	if err != nil {
		return nil, err
	}
	cc.initialFetchTimeout = initialFetchTimeout(c.GetEdsClusterConfig().GetEdsConfig())
	cc.edsName = c.GetEdsClusterConfig().GetServiceName()
	if cc.edsName == "" {
		cc.edsName = c.GetName()
	}
	return cc, nil
}

// compileClusterCommon compiles what every cluster type shares: timeouts,
// load balancing, circuit breakers, protocol options, TLS, TCP keepalive.
func compileClusterCommon(c *clusterv3.Cluster) (*clusterConfig, error) {
	cc := &clusterConfig{
		name: c.GetName(), connectTimeout: defaultConnectTimout,
		maxConnections: defaultCircuitLimit, maxPending: defaultCircuitLimit,
		maxRequests: defaultCircuitLimit, maxRetries: defaultMaxRetries,
	}
	if ka := c.GetUpstreamConnectionOptions().GetTcpKeepalive(); ka != nil {
		cc.tcpKeepalive = keepaliveConfig(ka)
	}
	if c.ConnectTimeout != nil {
		cc.connectTimeout = c.GetConnectTimeout().AsDuration()
	}
	lbp := c.GetLoadBalancingPolicy()
	switch c.GetLbPolicy() {
	case clusterv3.Cluster_ROUND_ROBIN:
	case clusterv3.Cluster_CLUSTER_PROVIDED:
		// Superseded by load_balancing_policy when that is set.
		if lbp == nil {
			return nil, errors.New("lb_policy CLUSTER_PROVIDED without load_balancing_policy not implemented")
		}
	default:
		return nil, fmt.Errorf("lb_policy %v not implemented", c.GetLbPolicy())
	}
	if lbp != nil {
		oh, err := compileLBPolicy(lbp)
		if err != nil {
			return nil, fmt.Errorf("load_balancing_policy: %w", err)
		}
		cc.overrideHost = oh
	}
	for _, t := range c.GetCircuitBreakers().GetThresholds() {
		if t.GetPriority() != corev3.RoutingPriority_DEFAULT {
			return nil, fmt.Errorf("circuit_breakers priority %v not implemented", t.GetPriority())
		}
		if t.MaxConnections != nil {
			cc.maxConnections = t.GetMaxConnections().GetValue()
		}
		if t.MaxPendingRequests != nil {
			cc.maxPending = t.GetMaxPendingRequests().GetValue()
		}
		if t.MaxRequests != nil {
			cc.maxRequests = t.GetMaxRequests().GetValue()
		}
		if t.MaxRetries != nil {
			cc.maxRetries = t.GetMaxRetries().GetValue()
		}
	}
	for k, a := range c.GetTypedExtensionProtocolOptions() {
		if k != httpProtocolOptions {
			return nil, fmt.Errorf("typed_extension_protocol_options[%q] not implemented", k)
		}
		var o upstreamhttpv3.HttpProtocolOptions
		if err := a.UnmarshalTo(&o); err != nil {
			return nil, fmt.Errorf("typed_extension_protocol_options[%q]: %w", k, err)
		}
		switch {
		case o.GetAutoConfig() != nil:
			if o.GetAutoConfig().GetHttp3ProtocolOptions() != nil || o.GetAutoConfig().GetAlternateProtocolsCacheOptions() != nil {
				return nil, fmt.Errorf("typed_extension_protocol_options[%q]: auto_config with HTTP/3 not implemented", k)
			}
			cc.negotiate = true
		case o.GetExplicitHttpConfig() != nil:
			switch o.GetExplicitHttpConfig().GetProtocolConfig().(type) {
			case *upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions:
				cc.http2 = true
			case *upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions:
			default:
				return nil, fmt.Errorf("typed_extension_protocol_options[%q]: explicit_http_config without HTTP/1 or HTTP/2 options not implemented", k)
			}
		default:
			return nil, fmt.Errorf("typed_extension_protocol_options[%q]: only explicit_http_config and auto_config are implemented", k)
		}
	}
	if ts := c.GetTransportSocket(); ts != nil {
		tc, sds, err := compileUpstreamTLS(ts)
		if err != nil {
			return nil, fmt.Errorf("transport_socket: %w", err)
		}
		cc.tls, cc.clientCertSDS = tc, sds
	}
	if cc.negotiate {
		if err := compileAutoConfig(cc); err != nil {
			return nil, err
		}
	}
	return cc, nil
}

// ALPN protocol IDs (RFC 7301).
const (
	alpnH2     = "h2"
	alpnHTTP11 = "http/1.1"
)

// compileAutoConfig checks and completes a cluster with HttpProtocolOptions
// auto_config, as Envoy does:
//
//   - auto_config sets the cluster's USE_ALPN feature
//     (ProtocolOptionsConfigImpl, use_alpn_ = has_auto_config(), in
//     source/extensions/upstreams/http/config.cc), and Envoy refuses a
//     cluster with that feature whose transport socket cannot do ALPN
//     (ClusterImplBase in source/common/upstream/upstream_impl.cc: "ALPN
//     configured for cluster ... which has a non-ALPN transport socket");
//     raw_buffer (no transport socket) cannot, TLS can. So auto_config
//     without TLS is a NACK here.
//   - The connection pool is Envoy's mixed pool (HttpConnPoolImplMixed,
//     source/common/http/mixed_conn_pool.h), built with the protocols
//     HTTP/2 and HTTP/1.1, which become the TLS socket's ALPN fallback
//     (wrapTransportSocketOptions, source/common/http/conn_pool_base.cc):
//     a TLS context that names no ALPN offers h2,http/1.1 (the fallback
//     is used only when the context sets none, ClientContextImpl::newSsl
//     in source/common/tls/client_context_impl.cc). Once connected
//     (HttpConnPoolImplMixed::onConnected, source/common/http/
//     mixed_conn_pool.cc) the connection speaks HTTP/2 when the server
//     picked h2 and HTTP/1.1 otherwise: when it picked http/1.1 and when
//     it answered no ALPN at all.
//
// Go's http.Transport with HTTP/1 and HTTP/2 enabled does the same (it
// uses HTTP/2 exactly when the server picked h2), but it always offers h2
// and http/1.1, adding whichever of them the configuration lacks; so a
// TLS context naming any other ALPN list than none or exactly
// h2,http/1.1 is refused here as not implemented (stricter than Envoy,
// which would offer that list).
func compileAutoConfig(cc *clusterConfig) error {
	if cc.tls == nil {
		return fmt.Errorf("ALPN configured for cluster %s which has a non-ALPN transport socket (auto_config needs TLS)", cc.name)
	}
	switch p := cc.tls.NextProtos; {
	case len(p) == 0:
		cc.tls.NextProtos = []string{alpnH2, alpnHTTP11}
	case slices.Equal(p, []string{alpnH2, alpnHTTP11}):
	default:
		return fmt.Errorf("auto_config with ALPN %q in the TLS context not implemented (only none, or h2,http/1.1)", p)
	}
	return nil
}

// keepaliveConfig is Envoy's TcpKeepalive as Go's dialer takes it
// (source/common/network/socket_option_factory.cc,
// buildTcpKeepaliveOptions): keepalive on, and each of time (idle
// seconds), interval (seconds) and probes (count) set when given, else the
// operating system's default (Go: a negative value leaves the option
// unchanged).
func keepaliveConfig(ka *corev3.TcpKeepalive) *net.KeepAliveConfig {
	kc := &net.KeepAliveConfig{Enable: true, Idle: -1, Interval: -1, Count: -1}
	if v := ka.GetKeepaliveTime(); v != nil {
		kc.Idle = time.Duration(v.GetValue()) * time.Second
	}
	if v := ka.GetKeepaliveInterval(); v != nil {
		kc.Interval = time.Duration(v.GetValue()) * time.Second
	}
	if v := ka.GetKeepaliveProbes(); v != nil {
		kc.Count = int(v.GetValue())
	}
	return kc
}

// initialFetchTimeout is how long a subscription from cs waits for its
// first resource: the field if set (0 disables the timer), else Envoy's
// 15 s default.
func initialFetchTimeout(cs *corev3.ConfigSource) time.Duration {
	if cs.GetInitialFetchTimeout() == nil {
		return defaultInitialFetchTimeout
	}
	return cs.GetInitialFetchTimeout().AsDuration()
}

// compileLBPolicy takes the first policy (Envoy uses the first one it
// supports; ours are override_host and round_robin). nil means round robin.
func compileLBPolicy(p *clusterv3.LoadBalancingPolicy) (*overrideHostPolicy, error) {
	if len(p.GetPolicies()) == 0 {
		return nil, errors.New("no policies")
	}
	tec := p.GetPolicies()[0].GetTypedExtensionConfig()
	msg, err := tec.GetTypedConfig().UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tec.GetName(), err)
	}
	switch cfg := msg.(type) {
	case *roundrobinv3.RoundRobin:
		return nil, nil
	case *overridehostv3.OverrideHost:
		oh := &overrideHostPolicy{}
		for _, s := range cfg.GetOverrideHostSources() {
			if s.GetMetadata() == nil {
				return nil, errors.New("override_host: only metadata sources are implemented")
			}
			oh.sources = append(oh.sources, toMetadataPath(s.GetMetadata()))
		}
		if k := cfg.GetSelectedHostKey(); k != nil {
			mp := toMetadataPath(k)
			oh.selected = &mp
		}
		fb, err := compileLBPolicy(cfg.GetFallbackPolicy())
		if err != nil {
			return nil, fmt.Errorf("override_host fallback_policy: %w", err)
		}
		if fb != nil {
			return nil, errors.New("override_host fallback_policy: only round_robin is implemented")
		}
		return oh, nil
	default:
		return nil, fmt.Errorf("load balancing policy %s (%T) not implemented", tec.GetName(), msg)
	}
}

func toMetadataPath(k *metadatav3.MetadataKey) metadataPath {
	mp := metadataPath{namespace: k.GetKey()}
	for _, seg := range k.GetPath() {
		mp.path = append(mp.path, seg.GetKey())
	}
	return mp
}

// compileUpstreamTLS compiles an UpstreamTlsContext: the server
// name, ALPN, server verification, and the client certificate's SDS name
// (one tls_certificate_sds_secret_configs entry over ADS, fetched as a
// listener's: Envoy's cluster waits for it, source/common/secret/sds_api.cc
// being an init target of the cluster's transport socket factory).
func compileUpstreamTLS(ts *corev3.TransportSocket) (*tls.Config, string, error) {
	if ts.GetName() != transportSocketTLS {
		return nil, "", fmt.Errorf("transport socket %q not implemented", ts.GetName())
	}
	var u tlsv3.UpstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&u); err != nil {
		return nil, "", err
	}
	var sdsName string
	switch sds := u.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs(); {
	case len(sds) > 1:
		return nil, "", fmt.Errorf("exactly one client certificate (tls_certificate_sds_secret_configs) is implemented upstream, got %d", len(sds))
	case len(sds) == 1:
		src := sds[0].GetSdsConfig()
		if src.GetAds() == nil {
			return nil, "", errors.New("the client certificate's SDS secret must come over ADS")
		}
		if t := src.GetInitialFetchTimeout(); t != nil && t.AsDuration() != 0 {
			return nil, "", errors.New("sds_config.initial_fetch_timeout other than 0 not implemented")
		}
		sdsName = sds[0].GetName()
	}
	cfg, err := upstreamServerVerification(&u)
	return cfg, sdsName, err
}

// upstreamServerVerification is the tls.Config of u without its client
// certificate: sni, ALPN, and the server certificate verified as Envoy
// does: against trusted_ca and the subject alternative name matchers only
// (never against sni), and not at all without a validation context.
func upstreamServerVerification(u *tlsv3.UpstreamTlsContext) (*tls.Config, error) {
	cfg := &tls.Config{
		ServerName:         u.GetSni(),
		NextProtos:         u.GetCommonTlsContext().GetAlpnProtocols(),
		InsecureSkipVerify: true, // verification below, Envoy's way
		MinVersion:         tls.VersionTLS12,
	}
	vc := u.GetCommonTlsContext().GetValidationContext()
	if vc == nil {
		return cfg, nil
	}
	var pem []byte
	var err error
	if vc.GetTrustedCa() != nil {
		if pem, err = dataSourceBytes(vc.GetTrustedCa()); err != nil {
			return nil, fmt.Errorf("trusted_ca: %w", err)
		}
		if len(pem) == 0 {
			// Envoy reads a trusted_ca that is set as non-empty data
			// (CertificateValidationContextConfigImpl::create,
			// envoy.reloadable_features.reject_empty_trusted_ca_file); an
			// empty one would otherwise verify nothing.
			return nil, errors.New("trusted_ca: DataSource cannot be empty")
		}
	}
	var pool *x509.CertPool
	if len(pem) > 0 {
		if pool, err = trustedCAPool(pem); err != nil {
			return nil, fmt.Errorf("trusted_ca: %w", err)
		}
	}
	// SAN matchers (source/common/tls/cert_validator/default_validator.cc,
	// matchSubjectAltName; san_matcher.cc): the certificate passes when
	// any matcher matches any SAN of its type. DNS and URI exact only, each
	// compared with the SAN's bytes as the certificate carries them
	// (Utility::generalNameAsString), never with a parsed and re-printed
	// URL, which would lower-case a URI's scheme and drop an empty fragment.
	var sans, uris []string
	for _, m := range vc.GetMatchTypedSubjectAltNames() {
		exact := m.GetMatcher().GetExact()
		switch {
		case exact == "":
			return nil, errors.New("match_typed_subject_alt_names: only exact matchers are implemented")
		case m.GetSanType() == tlsv3.SubjectAltNameMatcher_DNS:
			sans = append(sans, exact)
		case m.GetSanType() == tlsv3.SubjectAltNameMatcher_URI:
			uris = append(uris, exact)
		default:
			return nil, fmt.Errorf("match_typed_subject_alt_names: san_type %v not implemented (only DNS and URI)", m.GetSanType())
		}
	}
	if pool == nil && len(sans)+len(uris) > 0 {
		// Envoy refuses the context (CertificateValidationContextConfigImpl::
		// initialize, source/common/ssl/certificate_validation_context_config_impl.cc).
		return nil, errors.New("SAN-based verification of peer certificates without trusted CA is insecure and not allowed")
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("no server certificate")
		}
		if pool != nil {
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter}); err != nil {
				return err
			}
		}
		if len(sans) == 0 && len(uris) == 0 {
			return nil
		}
		leaf := cs.PeerCertificates[0]
		for _, want := range sans {
			if slices.Contains(leaf.DNSNames, want) {
				return nil
			}
		}
		if len(uris) > 0 {
			for _, got := range rawURISANs(leaf) {
				if slices.Contains(uris, got) {
					return nil
				}
			}
		}
		return fmt.Errorf("server certificate matches none of the subject alternative names %v %v", sans, uris)
	}
	return cfg, nil
}

// oidSubjectAltName is the subjectAltName extension (RFC 5280 4.2.1.6).
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// rawURISANs are c's uniformResourceIdentifier subject alternative names
// as their bytes stand in the certificate (crypto/x509 keeps only parsed
// URLs); none when the extension does not parse.
func rawURISANs(c *x509.Certificate) []string {
	for _, e := range c.Extensions {
		if !e.Id.Equal(oidSubjectAltName) {
			continue
		}
		var seq asn1.RawValue
		if rest, err := asn1.Unmarshal(e.Value, &seq); err != nil || len(rest) > 0 || !seq.IsCompound {
			return nil
		}
		var out []string
		for b := seq.Bytes; len(b) > 0; {
			var gn asn1.RawValue
			var err error
			if b, err = asn1.Unmarshal(b, &gn); err != nil {
				return nil
			}
			if gn.Class == asn1.ClassContextSpecific && gn.Tag == 6 { // uniformResourceIdentifier [6] IA5String
				out = append(out, string(gn.Bytes))
			}
		}
		return out
	}
	return nil
}

// endpointsOf returns the healthy endpoints of cla as "ip:port": health
// status HEALTHY or UNKNOWN (Envoy routes to both), in order.
func endpointsOf(cla *endpointv3.ClusterLoadAssignment) ([]string, error) {
	var out []string
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			if sa == nil || sa.GetProtocol() != corev3.SocketAddress_TCP {
				return nil, errors.New("endpoint without a TCP socket address")
			}
			switch lb.GetHealthStatus() {
			case corev3.HealthStatus_HEALTHY, corev3.HealthStatus_UNKNOWN:
				out = append(out, net.JoinHostPort(sa.GetAddress(), fmt.Sprint(sa.GetPortValue())))
			}
		}
	}
	return out, nil
}

func readFile(name string) ([]byte, error) { return os.ReadFile(name) }
