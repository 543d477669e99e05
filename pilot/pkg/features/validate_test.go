// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package features

import (
	"strings"
	"testing"
)

func TestLoadRefusesInvalidValuesNamingTheVariable(t *testing.T) {
	cases := []struct {
		name, value string
		want        string
	}{
		{"CLUSTER_DOMAIN", "a b", `CLUSTER_DOMAIN: "a b": not a DNS domain`},
		{"CLUSTER_DOMAIN", "Cluster.Local", `CLUSTER_DOMAIN: "Cluster.Local": not a DNS domain`},
		{"PILOT_GATEWAY_API_CONTROLLER_NAME", "not a name", `PILOT_GATEWAY_API_CONTROLLER_NAME: "not a name": not a Gateway API controller name`},
		{"PILOT_GATEWAY_API_CONTROLLER_NAME", "no-slash", `PILOT_GATEWAY_API_CONTROLLER_NAME: "no-slash": not a Gateway API controller name`},
		{"PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME", "Istio_Class", `PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME: "Istio_Class": not a Kubernetes object name`},
		{"PILOT_GATEWAY_XDS_ADDRESS", "pilot-discovery", `PILOT_GATEWAY_XDS_ADDRESS: "pilot-discovery": not HOST:PORT`},
		{"PILOT_GATEWAY_XDS_ADDRESS", "pilot:0", `PILOT_GATEWAY_XDS_ADDRESS: "pilot:0": port "0": want a number from 1 to 65535`},
		{"PILOT_GATEWAY_XDS_ADDRESS", "bad host:15010", `host "bad host" is neither an IP address nor a DNS name`},
		{"PILOT_GATEWAY_XDS_TOKEN_AUDIENCE", "infer mesh", `PILOT_GATEWAY_XDS_TOKEN_AUDIENCE: "infer mesh": must not contain white space`},
		{"PILOT_GATEWAY_PROXY_IMAGE", "envoy latest", `PILOT_GATEWAY_PROXY_IMAGE: "envoy latest": must not contain white space`},
	}
	for _, tc := range cases {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			_, err := Load(func(k string) (string, bool) {
				if k == tc.name {
					return tc.value, true
				}
				return "", false
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestValidValuesAccepted(t *testing.T) {
	env := map[string]string{
		"CLUSTER_DOMAIN":                    "corp.example",
		"PILOT_GATEWAY_API_CONTROLLER_NAME": "example.com/infermesh-gateway",
		"PILOT_GATEWAY_XDS_ADDRESS":         "10.0.0.1:15010",
	}
	f, err := Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if f.ClusterDomain != "corp.example" || f.ControllerName != "example.com/infermesh-gateway" || f.GatewayXDSAddress != "10.0.0.1:15010" {
		t.Errorf("features = %+v", f)
	}
	if err := CheckHostPort("[::1]:15010"); err != nil {
		t.Errorf("IPv6 address: %v", err)
	}
}
