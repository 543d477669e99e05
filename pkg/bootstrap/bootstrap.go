// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package bootstrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	grpccredv3 "github.com/envoyproxy/go-control-plane/envoy/config/grpc_credential/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pkg/re2size"
)

// Defaults and names used in the bootstrap.
const (
	// MetadataGatewayNamespace and MetadataGatewayName are the node metadata
	// keys (string values) that pilot-discovery maps to the Gateway
	// (pilot/pkg/xds, node.go; a test checks they agree). They are repeated
	// here so that pkg/ does not depend on pilot/.
	MetadataGatewayNamespace = "GATEWAY_NAMESPACE"
	MetadataGatewayName      = "GATEWAY_NAME"
	// DefaultAdminPort is the admin listener's port, on 127.0.0.1 only.
	DefaultAdminPort = 15000
	// DefaultStatusPort serves GET /healthz/ready on every address: Envoy's
	// admin /ready (200 once the initial xDS fetch is done), as Istio's
	// gateways do on the same port.
	DefaultStatusPort = 15021
	// ReadyPath is the readiness path on the status port.
	ReadyPath = "/healthz/ready"
	// XDSClusterName is the static cluster of the ADS server (Envoy gRPC
	// client only).
	XDSClusterName = "xds-grpc"
	// AdminClusterName is the static cluster of the admin listener, used by
	// the status listener.
	AdminClusterName = "admin"
	// StatusListenerName is the static status listener. It cannot clash
	// with the xDS listeners, named 0.0.0.0_<port>.
	StatusListenerName = "status"
	// SystemCAFile is the trust store read when no CA bundle is given: the
	// Debian CA bundle path, present in Envoy's distroless images.
	SystemCAFile = "/etc/ssl/certs/ca-certificates.crt"
	// FileBasedMetadataPlugin is the Google gRPC call-credentials plugin
	// that reads a header value from a file
	// (envoy.config.grpc_credential.v3.FileBasedMetadataConfig), and the
	// name of the credentials factory that applies it
	// (google_grpc.credentials_factory_name).
	FileBasedMetadataPlugin = "envoy.grpc_credentials.file_based_metadata"
	// RE2MaxProgramSize is the largest RE2 program Envoy accepts in a
	// regex of our xDS: the value of re2.max_program_size.error_level in
	// the static runtime layer (Envoy's default, 100, refuses a route
	// configuration holding a regex as plain as ^/v1/models/[a-z0-9-]{1,64}$).
	// It is Istio's value. The translator checks every user regex against
	// it (pilot/pkg/networking/core, regex.go).
	RE2MaxProgramSize = 32768
	// RuntimeLayerName names the one runtime layer, a static layer.
	RuntimeLayerName = "static"
)

// Config is what one Gateway's bootstrap needs.
type Config struct {
	// NodeID and Cluster are node.id and node.cluster. The Deployment
	// overrides the id per pod (--service-node), so NodeID is only the
	// default. Both are required.
	NodeID, Cluster string
	// GatewayNamespace and GatewayName identify the Gateway to
	// pilot-discovery (node.metadata GATEWAY_NAMESPACE and GATEWAY_NAME,
	// pilot/pkg/xds). Both are required.
	GatewayNamespace, GatewayName string
	// XDSAddress is pilot-discovery's ADS address, "host:port" (for example
	// pilot-discovery.infermesh-system.svc:15010). Required.
	XDSAddress string
	// Plaintext connects to ADS without TLS. It conflicts with TokenPath.
	Plaintext bool
	// CABundle is the PEM bundle that verifies the ADS server's certificate,
	// embedded inline. Empty: SystemCAFile (Envoy client) or gRPC's default
	// roots (Google client). Ignored with Plaintext. The server certificate
	// must name the host of XDSAddress (a DNS subject alternative name).
	CABundle []byte
	// TokenPath, when set, is the file holding the ServiceAccount token
	// sent as "authorization: Bearer <token>" on the ADS stream (Google
	// gRPC client with the file_based_metadata call credentials). Needs TLS.
	TokenPath string
	// AdminPort and StatusPort default to DefaultAdminPort and
	// DefaultStatusPort.
	AdminPort, StatusPort uint32
}

// ErrInvalidConfig wraps every error of Build about its Config.
var ErrInvalidConfig = errors.New("bootstrap: invalid config")

func (c *Config) validate() (host string, port uint32, err error) {
	var errs []error
	if c.NodeID == "" || c.Cluster == "" {
		errs = append(errs, errors.New("NodeID and Cluster are required"))
	}
	if c.GatewayNamespace == "" || c.GatewayName == "" {
		errs = append(errs, errors.New("GatewayNamespace and GatewayName are required"))
	}
	h, p, splitErr := net.SplitHostPort(c.XDSAddress)
	n, atoiErr := strconv.ParseUint(p, 10, 16)
	if splitErr != nil || h == "" || atoiErr != nil || n == 0 {
		errs = append(errs, fmt.Errorf("XDSAddress %q is not host:port", c.XDSAddress))
	}
	if c.Plaintext && c.TokenPath != "" {
		errs = append(errs, errors.New("TokenPath needs TLS: a bearer token must not cross the network in plaintext"))
	}
	if err := errors.Join(errs...); err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return h, uint32(n), nil
}

// Build returns the bootstrap for c, or an error wrapping ErrInvalidConfig.
// The result passes Bootstrap.ValidateAll.
func Build(c Config) (*bootstrapv3.Bootstrap, error) {
	host, port, err := c.validate()
	if err != nil {
		return nil, err
	}
	if c.AdminPort == 0 {
		c.AdminPort = DefaultAdminPort
	}
	if c.StatusPort == 0 {
		c.StatusPort = DefaultStatusPort
	}
	md, err := structpb.NewStruct(map[string]any{
		MetadataGatewayNamespace: c.GatewayNamespace,
		MetadataGatewayName:      c.GatewayName,
	})
	if err != nil {
		return nil, err
	}
	ads := &corev3.ApiConfigSource{
		ApiType:                   corev3.ApiConfigSource_GRPC,
		TransportApiVersion:       corev3.ApiVersion_V3,
		SetNodeOnFirstMessageOnly: true,
	}
	clusters := []*clusterv3.Cluster{staticCluster(AdminClusterName, "127.0.0.1", c.AdminPort, false)}
	if c.TokenPath != "" {
		svc, err := googleGRPC(c)
		if err != nil {
			return nil, err
		}
		ads.GrpcServices = []*corev3.GrpcService{svc}
	} else {
		ads.GrpcServices = []*corev3.GrpcService{{
			TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: XDSClusterName}},
		}}
		xc := staticCluster(XDSClusterName, host, port, true)
		if !c.Plaintext {
			ts, err := upstreamTLS(host, c.CABundle)
			if err != nil {
				return nil, err
			}
			xc.TransportSocket = ts
		}
		clusters = append(clusters, xc)
	}
	viaADS := func() *corev3.ConfigSource {
		return &corev3.ConfigSource{
			ResourceApiVersion:    corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}
	}
	status, err := statusListener(c.StatusPort)
	if err != nil {
		return nil, err
	}
	return &bootstrapv3.Bootstrap{
		Node: &corev3.Node{Id: c.NodeID, Cluster: c.Cluster, Metadata: md},
		Admin: &bootstrapv3.Admin{
			Address: socketAddress("127.0.0.1", c.AdminPort),
		},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: ads,
			LdsConfig: viaADS(),
			CdsConfig: viaADS(),
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Listeners: []*listenerv3.Listener{status},
			Clusters:  clusters,
		},
		LayeredRuntime: layeredRuntime(),
	}, nil
}

// layeredRuntime is one static layer setting re2.max_program_size.
// error_level to RE2MaxProgramSize. The value is a string, as Istio
// writes it: Envoy parses a string entry as an integer
// (source/common/runtime/runtime_impl.cc, SnapshotImpl::createEntry) and
// hands it to the RE2 limit (runtime_features.cc, maybeSetDeprecatedInts).
//
// No admin layer: with one, POST /runtime_modify on the admin port could
// lower the limit below the one the translator checks, and a route the
// translator accepted would then be refused. Envoy adds an admin layer
// only when layered_runtime has no layer at all (source/server/
// configuration_impl.cc), and without layered_runtime it has none either,
// so no earlier behaviour is lost.
func layeredRuntime() *bootstrapv3.LayeredRuntime {
	layer := &structpb.Struct{Fields: map[string]*structpb.Value{
		re2size.RuntimeKey: structpb.NewStringValue(strconv.Itoa(RE2MaxProgramSize)),
	}}
	return &bootstrapv3.LayeredRuntime{Layers: []*bootstrapv3.RuntimeLayer{{
		Name:           RuntimeLayerName,
		LayerSpecifier: &bootstrapv3.RuntimeLayer_StaticLayer{StaticLayer: layer},
	}}}
}

// JSON returns Build(c) as indented JSON with proto field names, the form
// Envoy reads with -c <file>.json. The output is stable for equal configs.
func JSON(c Config) ([]byte, error) {
	b, err := Build(c)
	if err != nil {
		return nil, err
	}
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: encode: %w", err)
	}
	// protojson varies its whitespace on purpose; re-indenting makes the
	// bytes stable, so the ConfigMap holding them does not churn.
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("bootstrap: indent: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol: corev3.SocketAddress_TCP, Address: host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// staticCluster is a one-endpoint cluster: STRICT_DNS for a name, STATIC
// for an IP; http2 turns on HTTP/2 (gRPC).
func staticCluster(name, host string, port uint32, http2 bool) *clusterv3.Cluster {
	typ := clusterv3.Cluster_STATIC
	if net.ParseIP(host) == nil {
		typ = clusterv3.Cluster_STRICT_DNS
	}
	c := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: typ},
		ConnectTimeout:       durationpb.New(5 * time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(host, port)}},
			}}}},
		},
	}
	if http2 {
		opts := &upstreamhttpv3.HttpProtocolOptions{
			UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
				ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
					ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
						Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
					},
				},
			},
		}
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(opts),
		}
		// A long-lived ADS connection must notice a dead peer.
		c.UpstreamConnectionOptions = &clusterv3.UpstreamConnectionOptions{
			TcpKeepalive: &corev3.TcpKeepalive{
				KeepaliveTime: wrapperspb.UInt32(300), KeepaliveInterval: wrapperspb.UInt32(30), KeepaliveProbes: wrapperspb.UInt32(3),
			},
		}
	}
	return c
}

// upstreamTLS verifies the server's chain against caPEM (or the system
// store) and its DNS name against host; it offers ALPN h2, as gRPC servers
// require.
func upstreamTLS(host string, caPEM []byte) (*corev3.TransportSocket, error) {
	trusted := &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: SystemCAFile}}
	if len(caPEM) > 0 {
		trusted = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: string(caPEM)}}
	}
	ctx := &tlsv3.UpstreamTlsContext{
		Sni: host,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols: []string{"h2"},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: trusted,
				MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
					SanType: tlsv3.SubjectAltNameMatcher_DNS,
					Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: host}},
				}},
			}},
		},
	}
	a, err := anypb.New(ctx)
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}, nil
}

// googleGRPC is the ADS service through the Google gRPC client: TLS channel
// credentials, and the token file as "authorization: Bearer <token>".
//
// The plugin is applied only by the credentials factory of the same name
// (credentials_factory_name). Envoy's default factory, used when the name is
// empty, builds the built-in call credentials and skips every from_plugin
// entry (source/common/grpc/google_grpc_creds_impl.cc,
// CredsUtility::callCredentials), so the stream would open without a token;
// Envoy's own test of the plugin sets the name
// (test/extensions/grpc_credentials/file_based_metadata/
// file_based_metadata_grpc_credentials_test.cc).
func googleGRPC(c Config) (*corev3.GrpcService, error) {
	ssl := &corev3.GrpcService_GoogleGrpc_SslCredentials{}
	if len(c.CABundle) > 0 {
		ssl.RootCerts = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: string(c.CABundle)}}
	}
	plugin, err := anypb.New(&grpccredv3.FileBasedMetadataConfig{
		SecretData:   &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: c.TokenPath}},
		HeaderKey:    "authorization",
		HeaderPrefix: "Bearer ",
	})
	if err != nil {
		return nil, err
	}
	return &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{
		TargetUri:  c.XDSAddress,
		StatPrefix: "xds_grpc",
		// Envoy's default credentials factory (empty name) skips plugin
		// call credentials, so without this no token would be sent.
		CredentialsFactoryName: FileBasedMetadataPlugin,
		ChannelCredentials: &corev3.GrpcService_GoogleGrpc_ChannelCredentials{
			CredentialSpecifier: &corev3.GrpcService_GoogleGrpc_ChannelCredentials_SslCredentials{SslCredentials: ssl},
		},
		CallCredentials: []*corev3.GrpcService_GoogleGrpc_CallCredentials{{
			CredentialSpecifier: &corev3.GrpcService_GoogleGrpc_CallCredentials_FromPlugin{
				FromPlugin: &corev3.GrpcService_GoogleGrpc_CallCredentials_MetadataCredentialsFromPlugin{
					Name:       FileBasedMetadataPlugin,
					ConfigType: &corev3.GrpcService_GoogleGrpc_CallCredentials_MetadataCredentialsFromPlugin_TypedConfig{TypedConfig: plugin},
				},
			},
		}},
	}}}, nil
}

// statusListener answers GET ReadyPath on every address with the admin's
// /ready, so a kubelet probe sees readiness without reaching the admin
// listener (which stays on 127.0.0.1).
func statusListener(port uint32) (*listenerv3.Listener, error) {
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "status",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "status",
			VirtualHosts: []*routev3.VirtualHost{{
				Name: "status", Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: ReadyPath}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: AdminClusterName},
						PrefixRewrite:    "/ready",
					}},
				}},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router},
		}},
	}
	a, err := anypb.New(hcm)
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:    StatusListenerName,
		Address: socketAddress("0.0.0.0", port),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a},
		}}}},
	}, nil
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("bootstrap: %T does not pack into Any: %v", m, err))
	}
	return a
}
