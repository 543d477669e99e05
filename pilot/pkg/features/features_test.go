// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package features

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsAreIstios(t *testing.T) {
	want := Features{
		EnableGatewayAPI:         true,
		EnableInferenceExtension: false,
		EnableGatewayAPIStatus:   true,
		ControllerName:           "istio.io/gateway-controller",
		DefaultGatewayClassName:  "istio",
		ClusterDomain:            "cluster.local",
		// Istio deploys Gateways by default too
		// (PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER).
		EnableGatewayDeployment: true,
		GatewayProxyImage:       "docker.io/envoyproxy/envoy:distroless-v1.40.0",
		GatewayXDSAddress:       "pilot-discovery.infermesh-system.svc:15010",
		// Istio's proxies use "istio-ca" (TOKEN_AUDIENCES); ours is our
		// own name.
		GatewayXDSTokenAudience: "infermesh",
		// Ours (Istio has none): far above what one team puts on a shared
		// Gateway, low enough that one namespace cannot fill it alone.
		MaxRouteMatchesPerNamespace: 20000,
		MaxRegexMatchesPerNamespace: 10000,
		FileGatewayAPIChannel:       "standard",
	}
	if d := cmp.Diff(want, Defaults()); d != "" {
		t.Fatalf("defaults (-want +got):\n%s", d)
	}
}

func TestLoad(t *testing.T) {
	cases := []struct {
		name    string
		env     func(string) (string, bool)
		want    func(*Features)
		wantErr string
	}{
		{name: "seed sets both names", env: env("ENABLE_GATEWAY_API_INFERENCE_EXTENSION", "true", "SUPPORT_GATEWAY_API_INFERENCE_EXTENSION", "true"),
			want: func(f *Features) { f.EnableInferenceExtension = true }},
		{name: "alias alone", env: env("SUPPORT_GATEWAY_API_INFERENCE_EXTENSION", "1"),
			want: func(f *Features) { f.EnableInferenceExtension = true }},
		{name: "name and alias disagree", env: env("ENABLE_GATEWAY_API_INFERENCE_EXTENSION", "true", "SUPPORT_GATEWAY_API_INFERENCE_EXTENSION", "false"),
			wantErr: "disagree"},
		{name: "not a boolean", env: env("PILOT_ENABLE_GATEWAY_API_STATUS", "yes"),
			wantErr: `PILOT_ENABLE_GATEWAY_API_STATUS: "yes" is not a boolean`},
		{name: "controller name", env: env("PILOT_GATEWAY_API_CONTROLLER_NAME", "infermesh.io/gateway-controller", "PILOT_ENABLE_GATEWAY_API", "false"),
			want: func(f *Features) { f.ControllerName = "infermesh.io/gateway-controller"; f.EnableGatewayAPI = false }},
		{name: "empty string flag", env: env("CLUSTER_DOMAIN", " "), wantErr: "CLUSTER_DOMAIN: must not be empty"},
		{name: "token audience", env: env("PILOT_GATEWAY_XDS_TOKEN_AUDIENCE", "https://xds.example.com"),
			want: func(f *Features) { f.GatewayXDSTokenAudience = "https://xds.example.com" }},
		{name: "token audience with a comma", env: env("PILOT_GATEWAY_XDS_TOKEN_AUDIENCE", "a,b"),
			wantErr: `PILOT_GATEWAY_XDS_TOKEN_AUDIENCE: "a,b": must not contain white space, control characters or commas`},
		{name: "limits", env: env("PILOT_MAX_ROUTE_MATCHES_PER_NAMESPACE", "0", "PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE", " 500 "),
			want: func(f *Features) { f.MaxRouteMatchesPerNamespace = 0; f.MaxRegexMatchesPerNamespace = 500 }},
		{name: "unknown channel", env: env("PILOT_FILE_GATEWAY_API_CHANNEL", "beta"),
			wantErr: `PILOT_FILE_GATEWAY_API_CHANNEL: "beta": not standard or experimental`},
		{name: "negative limit", env: env("PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE", "-1"),
			wantErr: `PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE: "-1" is not a whole number of 0 or more`},
		{name: "limit not a number", env: env("PILOT_MAX_ROUTE_MATCHES_PER_NAMESPACE", "1e4"),
			wantErr: `PILOT_MAX_ROUTE_MATCHES_PER_NAMESPACE: "1e4" is not a whole number`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Load(tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Defaults()
			tc.want(&want)
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestUsageAndHandlerListEveryFlag(t *testing.T) {
	usage := Usage()
	rec := httptest.NewRecorder()
	Handler(Defaults()).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/features", nil))
	var body struct {
		Flags   []Flag
		Current Features
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Flags) != len(table) || body.Current != Defaults() {
		t.Fatalf("debug endpoint: %d flags, current %+v", len(body.Flags), body.Current)
	}
	for _, f := range Flags() {
		if !strings.Contains(usage, f.Name) || !strings.Contains(usage, "default "+f.Default) {
			t.Errorf("usage lacks %s with its default", f.Name)
		}
	}
	if !strings.Contains(usage, "SUPPORT_GATEWAY_API_INFERENCE_EXTENSION") {
		t.Error("usage lacks the alias")
	}
}
