// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package bootstrap_test

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpccredv3 "github.com/envoyproxy/go-control-plane/envoy/config/grpc_credential/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/bootstrap"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/re2size"
)

const caPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

func base() bootstrap.Config {
	return bootstrap.Config{
		NodeID: "gateway-istio.gateway-namespace", Cluster: "gateway-istio.gateway-namespace",
		GatewayNamespace: "gateway-namespace", GatewayName: "gateway",
		XDSAddress: "pilot-discovery.infermesh-system.svc:15010",
	}
}

// roundTrip builds c, encodes it as JSON and decodes it back, as Envoy reads it.
func roundTrip(t *testing.T, c bootstrap.Config) *bootstrapv3.Bootstrap {
	t.Helper()
	b, err := bootstrap.JSON(c)
	if err != nil {
		t.Fatal(err)
	}
	var out bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(b, &out); err != nil {
		t.Fatalf("the JSON does not decode: %v\n%s", err, b)
	}
	if err := out.ValidateAll(); err != nil {
		t.Fatalf("ValidateAll: %v\n%s", err, b)
	}
	return &out
}

func TestBootstrapVariants(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*bootstrap.Config)
		check  func(t *testing.T, b *bootstrapv3.Bootstrap)
	}{
		{"plaintext", func(c *bootstrap.Config) { c.Plaintext = true }, func(t *testing.T, b *bootstrapv3.Bootstrap) {
			xc := cluster(b, bootstrap.XDSClusterName)
			if xc == nil || xc.TransportSocket != nil {
				t.Fatalf("xds cluster = %v, want one without TLS", xc)
			}
			if xc.TypedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] == nil {
				t.Error("xds cluster is not HTTP/2")
			}
			if g := b.DynamicResources.AdsConfig.GrpcServices[0].GetEnvoyGrpc(); g.GetClusterName() != bootstrap.XDSClusterName {
				t.Errorf("ADS service = %v", b.DynamicResources.AdsConfig.GrpcServices[0])
			}
		}},
		{"TLS with a CA bundle", func(c *bootstrap.Config) { c.CABundle = []byte(caPEM) }, func(t *testing.T, b *bootstrapv3.Bootstrap) {
			tc := upstreamTLS(t, cluster(b, bootstrap.XDSClusterName))
			vc := tc.CommonTlsContext.GetValidationContext()
			if vc.TrustedCa.GetInlineString() != caPEM || tc.Sni != "pilot-discovery.infermesh-system.svc" ||
				vc.MatchTypedSubjectAltNames[0].Matcher.GetExact() != "pilot-discovery.infermesh-system.svc" ||
				tc.CommonTlsContext.AlpnProtocols[0] != "h2" {
				t.Errorf("TLS context = %v", tc)
			}
		}},
		{"TLS with the system trust store", func(*bootstrap.Config) {}, func(t *testing.T, b *bootstrapv3.Bootstrap) {
			tc := upstreamTLS(t, cluster(b, bootstrap.XDSClusterName))
			if f := tc.CommonTlsContext.GetValidationContext().TrustedCa.GetFilename(); f != bootstrap.SystemCAFile {
				t.Errorf("trusted CA file = %q", f)
			}
		}},
		{"ServiceAccount token", func(c *bootstrap.Config) {
			c.CABundle, c.TokenPath = []byte(caPEM), "/var/run/secrets/xds/token"
		}, func(t *testing.T, b *bootstrapv3.Bootstrap) {
			if cluster(b, bootstrap.XDSClusterName) != nil {
				t.Error("xds cluster present though the Google gRPC client is used")
			}
			g := b.DynamicResources.AdsConfig.GrpcServices[0].GetGoogleGrpc()
			if g.GetTargetUri() != "pilot-discovery.infermesh-system.svc:15010" ||
				g.ChannelCredentials.GetSslCredentials().RootCerts.GetInlineString() != caPEM {
				t.Fatalf("google_grpc = %v", g)
			}
			// Envoy's default factory (empty name) skips plugin call
			// credentials: without the factory's name no token is sent.
			if g.GetCredentialsFactoryName() != bootstrap.FileBasedMetadataPlugin {
				t.Errorf("credentials_factory_name = %q, want %q", g.GetCredentialsFactoryName(), bootstrap.FileBasedMetadataPlugin)
			}
			p := g.CallCredentials[0].GetFromPlugin()
			var fb grpccredv3.FileBasedMetadataConfig
			if p.GetName() != bootstrap.FileBasedMetadataPlugin || p.GetTypedConfig().UnmarshalTo(&fb) != nil {
				t.Fatalf("call credentials = %v", p)
			}
			if fb.SecretData.GetFilename() != "/var/run/secrets/xds/token" || fb.HeaderKey != "authorization" || fb.HeaderPrefix != "Bearer " {
				t.Errorf("file based metadata = %v", &fb)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mutate(&c)
			b := roundTrip(t, c)
			ads := b.DynamicResources.AdsConfig
			if ads.ApiType != corev3.ApiConfigSource_GRPC || ads.TransportApiVersion != corev3.ApiVersion_V3 || !ads.SetNodeOnFirstMessageOnly {
				t.Errorf("ads_config = %v", ads)
			}
			for name, cs := range map[string]*corev3.ConfigSource{"lds": b.DynamicResources.LdsConfig, "cds": b.DynamicResources.CdsConfig} {
				if cs.GetAds() == nil || cs.ResourceApiVersion != corev3.ApiVersion_V3 {
					t.Errorf("%s_config = %v, want ADS v3", name, cs)
				}
			}
			if a := b.Admin.Address.GetSocketAddress(); a.Address != "127.0.0.1" || a.GetPortValue() != bootstrap.DefaultAdminPort {
				t.Errorf("admin address = %v, want 127.0.0.1:15000", a)
			}
			if l := b.StaticResources.Listeners; len(l) != 1 || l[0].Address.GetSocketAddress().GetPortValue() != bootstrap.DefaultStatusPort {
				t.Errorf("static listeners = %v, want the status listener on 15021", l)
			}
			if b.Node.Id != c.NodeID || b.Node.Cluster != c.Cluster {
				t.Errorf("node = %v", b.Node)
			}
			tc.check(t, b)
		})
	}
}

func TestBootstrapRejects(t *testing.T) {
	for name, mutate := range map[string]func(*bootstrap.Config){
		"token over plaintext": func(c *bootstrap.Config) { c.Plaintext, c.TokenPath = true, "/t" },
		"no gateway":           func(c *bootstrap.Config) { c.GatewayName = "" },
		"no node id":           func(c *bootstrap.Config) { c.NodeID = "" },
		"address without port": func(c *bootstrap.Config) { c.XDSAddress = "pilot-discovery" },
		"port out of range":    func(c *bootstrap.Config) { c.XDSAddress = "pilot-discovery:70000" },
	} {
		t.Run(name, func(t *testing.T) {
			c := base()
			mutate(&c)
			if _, err := bootstrap.Build(c); !errors.Is(err, bootstrap.ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestJSONIsStable(t *testing.T) {
	a, err := bootstrap.JSON(base())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := bootstrap.JSON(base())
	if !bytes.Equal(a, b) {
		t.Fatal("two encodings of one config differ")
	}
	if !bytes.Contains(a, []byte(`"set_node_on_first_message_only": true`)) {
		t.Errorf("JSON does not use proto field names:\n%s", a)
	}
}

// The node of the bootstrap names its Gateway to pilot/pkg/xds: a request
// with it passes the node check (and fails only because nothing is
// published yet), while a node without the metadata fails the check.
func TestNodeMetadataRoundTripsThroughXDS(t *testing.T) {
	stop := krt.WithStop(t.Context().Done())
	srv, err := xds.NewServer(xds.Config{
		Gateways:  krt.NewStaticCollection[model.Gateway](nil, nil, stop),
		Endpoints: krt.NewStaticCollection[model.ClusterEndpoints](nil, nil, stop),
	})
	if err != nil {
		t.Fatal(err)
	}
	if bootstrap.MetadataGatewayNamespace != xds.MetadataGatewayNamespace || bootstrap.MetadataGatewayName != xds.MetadataGatewayName {
		t.Fatal("metadata keys differ from pilot/pkg/xds's")
	}
	node := roundTrip(t, base()).Node
	fetch := func(n *corev3.Node) error {
		_, err := srv.Cache().Fetch(t.Context(), &discoveryv3.DiscoveryRequest{Node: n, TypeUrl: resourcev3.ListenerType})
		return err
	}
	if err := fetch(node); err == nil || status.Code(err) == codes.InvalidArgument {
		t.Fatalf("fetch with the bootstrap's node: %v, want a not-yet-published error, not InvalidArgument", err)
	}
	if err := fetch(&corev3.Node{Id: node.Id}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("fetch without metadata: %v, want InvalidArgument (the check this test relies on)", err)
	}
}

func cluster(b *bootstrapv3.Bootstrap, name string) *clusterv3.Cluster {
	for _, c := range b.StaticResources.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func upstreamTLS(t *testing.T, c *clusterv3.Cluster) *tlsv3.UpstreamTlsContext {
	t.Helper()
	if c == nil || c.TransportSocket == nil {
		t.Fatalf("cluster %v has no transport socket", c)
	}
	var tc tlsv3.UpstreamTlsContext
	if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(&tc); err != nil {
		t.Fatal(err)
	}
	return &tc
}

// The bootstrap raises Envoy's RE2 program size limit (default 100) in one
// static runtime layer and has no admin layer that could change it.
func TestRuntimeRaisesRE2ProgramSizeLimit(t *testing.T) {
	b := roundTrip(t, base())
	layers := b.GetLayeredRuntime().GetLayers()
	if len(layers) != 1 || layers[0].GetStaticLayer() == nil {
		t.Fatalf("layered_runtime layers = %v, want one static layer", layers)
	}
	v := layers[0].GetStaticLayer().GetFields()[re2size.RuntimeKey]
	if v.GetStringValue() != strconv.Itoa(bootstrap.RE2MaxProgramSize) || bootstrap.RE2MaxProgramSize != 32768 {
		t.Errorf("%s = %v, want \"32768\"", re2size.RuntimeKey, v)
	}
	if len(layers[0].GetStaticLayer().GetFields()) != 1 {
		t.Errorf("static layer = %v, want only %s", layers[0].GetStaticLayer(), re2size.RuntimeKey)
	}
}
