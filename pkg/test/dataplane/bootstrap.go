// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpccredv3 "github.com/envoyproxy/go-control-plane/envoy/config/grpc_credential/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

const fileBasedMetadataPlugin = "envoy.grpc_credentials.file_based_metadata"

// adsTarget is what the bootstrap says about reaching the ADS server.
type adsTarget struct {
	node    *corev3.Node
	delta   bool
	address string // host:port
	tls     *tls.Config
	token   *fileToken
	// keepalive is the ADS cluster's upstream_connection_options.tcp_keepalive.
	keepalive *net.KeepAliveConfig
	// regex is the regex engine as the bootstrap's runtime configures it.
	regex regexEngine
	// static is the bootstrap's static_resources and admin (static.go).
	static *staticConfig
}

// parseBootstrap reads an envoy.config.bootstrap.v3.Bootstrap (JSON) and
// returns its node and ADS connection: dynamic_resources.ads_config
// (api_type GRPC or DELTA_GRPC, one grpc_service) either as envoy_grpc,
// naming a static cluster (first endpoint's socket address, HTTP/2 required,
// optional UpstreamTlsContext), or as google_grpc (target_uri, ssl channel
// credentials with optional root_certs, optional file_based_metadata call
// credentials, applied only under the credentials factory of that name, as
// Envoy does: see credentialsFactory). LDS and CDS must come over ADS.
// layered_runtime sets the regex engine's program size limit (runtime.go).
// static_resources (listeners and clusters) and admin are compiled by
// compileStatic (static.go); any of their fields not implemented fails.
func parseBootstrap(b []byte) (*adsTarget, error) {
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(b, &bs); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if err := bs.ValidateAll(); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	dr := bs.GetDynamicResources()
	if dr.GetLdsConfig().GetAds() == nil || dr.GetCdsConfig().GetAds() == nil {
		return nil, errors.New("bootstrap: dynamic_resources lds_config and cds_config must be ADS")
	}
	ads := dr.GetAdsConfig()
	t := &adsTarget{node: bs.GetNode()}
	rt, err := runtimeValues(bs.GetLayeredRuntime())
	if err != nil {
		return nil, err
	}
	if t.regex.maxProgramSize, err = re2MaxProgramSize(rt); err != nil {
		return nil, err
	}
	if t.static, err = compileStatic(&bs, t.regex); err != nil {
		return nil, err
	}
	switch ads.GetApiType() {
	case corev3.ApiConfigSource_GRPC:
	case corev3.ApiConfigSource_DELTA_GRPC:
		t.delta = true
	default:
		return nil, fmt.Errorf("bootstrap: ads_config api_type %v not implemented", ads.GetApiType())
	}
	if len(ads.GetGrpcServices()) != 1 {
		return nil, errors.New("bootstrap: ads_config needs exactly one grpc_service")
	}
	svc := ads.GetGrpcServices()[0]
	switch {
	case svc.GetEnvoyGrpc() != nil:
		if err := t.fromStaticCluster(&bs, svc.GetEnvoyGrpc().GetClusterName()); err != nil {
			return nil, err
		}
	case svc.GetGoogleGrpc() != nil:
		if err := t.fromGoogleGRPC(svc.GetGoogleGrpc()); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("bootstrap: ads grpc_service has no target")
	}
	return t, nil
}

func (t *adsTarget) fromStaticCluster(bs *bootstrapv3.Bootstrap, name string) error {
	var c *clusterv3.Cluster
	for _, sc := range bs.GetStaticResources().GetClusters() {
		if sc.GetName() == name {
			c = sc
		}
	}
	if c == nil {
		return fmt.Errorf("bootstrap: ADS cluster %q is not a static cluster", name)
	}
	eps := c.GetLoadAssignment().GetEndpoints()
	if len(eps) == 0 || len(eps[0].GetLbEndpoints()) == 0 {
		return fmt.Errorf("bootstrap: ADS cluster %q has no endpoint", name)
	}
	sa := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	t.address = net.JoinHostPort(sa.GetAddress(), fmt.Sprint(sa.GetPortValue()))
	h2 := false
	if a := c.GetTypedExtensionProtocolOptions()[httpProtocolOptions]; a != nil {
		var o upstreamhttpv3.HttpProtocolOptions
		if err := a.UnmarshalTo(&o); err != nil {
			return err
		}
		h2 = o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
	}
	if !h2 {
		return fmt.Errorf("bootstrap: ADS cluster %q is not HTTP/2 (Envoy's gRPC client needs it)", name)
	}
	if sc := t.static.clusters[name]; sc != nil {
		t.keepalive = sc.cfg.tcpKeepalive
	}
	if ts := c.GetTransportSocket(); ts != nil {
		tc, sds, err := compileUpstreamTLS(ts)
		if err != nil {
			return fmt.Errorf("bootstrap: ADS cluster %q: %w", name, err)
		}
		if sds != "" {
			// The ADS connection cannot wait for a secret it would fetch.
			return fmt.Errorf("bootstrap: ADS cluster %q: a client certificate over SDS not implemented", name)
		}
		t.tls = tc
	}
	return nil
}

func (t *adsTarget) fromGoogleGRPC(g *corev3.GrpcService_GoogleGrpc) error {
	t.address = g.GetTargetUri()
	ssl := g.GetChannelCredentials().GetSslCredentials()
	if ssl == nil {
		return errors.New("bootstrap: google_grpc without ssl_credentials not implemented")
	}
	host, _, err := net.SplitHostPort(t.address)
	if err != nil {
		return fmt.Errorf("bootstrap: target_uri: %w", err)
	}
	t.tls = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if ssl.GetRootCerts() != nil {
		pem, err := dataSourceBytes(ssl.GetRootCerts())
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return errors.New("bootstrap: root_certs: no PEM certificates")
		}
		t.tls.RootCAs = pool
	}
	applyPlugins, err := credentialsFactory(g.GetCredentialsFactoryName())
	if err != nil {
		return err
	}
	for _, cc := range g.GetCallCredentials() {
		p := cc.GetFromPlugin()
		if p == nil {
			return errors.New("bootstrap: call credentials other than from_plugin not implemented")
		}
		if !applyPlugins {
			continue // ignored, as Envoy's default factory ignores them
		}
		if p.GetName() != fileBasedMetadataPlugin {
			return errors.New("bootstrap: only the file_based_metadata call credentials plugin is implemented")
		}
		var fb grpccredv3.FileBasedMetadataConfig
		if err := p.GetTypedConfig().UnmarshalTo(&fb); err != nil {
			return err
		}
		if fb.GetSecretData().GetFilename() == "" {
			return errors.New("bootstrap: file_based_metadata secret_data must be a filename")
		}
		key := fb.GetHeaderKey()
		if key == "" {
			key = "authorization" // the plugin's default
		}
		t.token = &fileToken{file: fb.GetSecretData().GetFilename(), key: strings.ToLower(key), prefix: fb.GetHeaderPrefix()}
	}
	return nil
}

// Google gRPC credentials factories (google_grpc.credentials_factory_name).
const (
	defaultCredentialsFactory = "envoy.grpc_credentials.default"
	fileBasedMetadataFactory  = fileBasedMetadataPlugin
)

// credentialsFactory says whether the factory named by
// credentials_factory_name applies from_plugin call credentials, as Envoy
// chooses it (source/common/grpc/google_grpc_utils.cc,
// getGoogleGrpcChannelCredentials): an empty name is the default factory,
// an unknown name fails the bootstrap ("Unknown google grpc credentials
// factory"). The default factory (source/common/grpc/
// google_grpc_creds_impl.cc, CredsUtility::callCredentials) builds only the
// built-in call credentials and silently skips every from_plugin entry, so
// the stream opens without the plugin's header: the data plane ignores them
// too, exactly (it does not refuse the bootstrap, since Envoy accepts it).
// The file_based_metadata factory (source/extensions/grpc_credentials/
// file_based_metadata/config.cc) applies the plugin of its name. Other
// factories Envoy ships (aws_iam) are not implemented.
func credentialsFactory(name string) (applyPlugins bool, err error) {
	switch name {
	case "", defaultCredentialsFactory:
		return false, nil
	case fileBasedMetadataFactory:
		return true, nil
	case "envoy.grpc_credentials.aws_iam":
		return false, fmt.Errorf("bootstrap: google_grpc credentials_factory_name %q not implemented", name)
	}
	return false, fmt.Errorf("bootstrap: Unknown google grpc credentials factory: %s", name)
}

// dialOptions are the gRPC options for the ADS connection.
func (t *adsTarget) dialOptions(dial func(ctx context.Context, network, addr string) (net.Conn, error)) []grpc.DialOption {
	var opts []grpc.DialOption
	if t.tls != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(t.tls.Clone())))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if t.token != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(t.token))
	}
	switch {
	case dial != nil:
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		}))
	case t.keepalive != nil:
		// The ADS cluster's TCP keepalive (keepaliveConfig, cluster.go).
		d := &net.Dialer{KeepAliveConfig: *t.keepalive}
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}))
	}
	return opts
}

// fileToken is file_based_metadata: the file is read each time credentials
// are attached to a call (each ADS stream), as the Envoy plugin does.
type fileToken struct{ file, key, prefix string }

func (f *fileToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	b, err := os.ReadFile(f.file)
	if err != nil {
		return nil, fmt.Errorf("file_based_metadata: %w", err)
	}
	return map[string]string{f.key: f.prefix + strings.TrimSpace(string(b))}, nil
}

func (f *fileToken) RequireTransportSecurity() bool { return true }
