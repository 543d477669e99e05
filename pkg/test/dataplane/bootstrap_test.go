// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/infermesh/infermesh/pkg/bootstrap"
)

// google_grpc call credentials are honoured as Envoy's credentials factory
// honours them: the file_based_metadata factory applies the plugin; the
// default factory (no name, or its own name) ignores it, so no token is
// sent; an unknown factory fails the bootstrap.
func TestBootstrapCredentialsFactory(t *testing.T) {
	base, err := bootstrap.JSON(bootstrap.Config{
		NodeID: "gw-0", Cluster: "gateway", GatewayNamespace: "gateway-namespace", GatewayName: "gateway",
		XDSAddress: "pilot-discovery:15012", TokenPath: "/var/run/secrets/xds/token",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		factory   string
		wantToken bool
		wantErr   string
	}{
		{factory: bootstrap.FileBasedMetadataPlugin, wantToken: true},
		{factory: ""},
		{factory: "envoy.grpc_credentials.default"},
		{factory: "envoy.grpc_credentials.bogus", wantErr: "Unknown google grpc credentials factory"},
	} {
		t.Run(tc.factory, func(t *testing.T) {
			target, err := parseBootstrap(withFactory(t, base, tc.factory))
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case (target.token != nil) != tc.wantToken:
				t.Fatalf("token sent = %v, want %v", target.token != nil, tc.wantToken)
			}
		})
	}
}

// withFactory returns the bootstrap b with the ADS google_grpc's
// credentials_factory_name set to name ("" clears it).
func withFactory(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(b, &bs); err != nil {
		t.Fatal(err)
	}
	bs.GetDynamicResources().GetAdsConfig().GetGrpcServices()[0].GetGoogleGrpc().CredentialsFactoryName = name
	out, err := protojson.Marshal(&bs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
