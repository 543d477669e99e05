// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// TestConfigSourcesWaitForTheirResource: every EDS and RDS config source
// sets initial_fetch_timeout to 0 explicitly (Envoy's default, when unset,
// is 15 s, after which a warming cluster starts with no endpoints and a
// listener with no routes); see architecture/xds.md, "Initial fetch".
func TestConfigSourcesWaitForTheirResource(t *testing.T) {
	gw := gateway(
		httpRoute("llm", "a", []string{"a.example.com"}, model.Rule{Backends: []model.Backend{
			{Weight: 1, Pool: pool("llm", "p", inferencev1.EndpointPickerFailOpen)},
			{Weight: 1, Service: svc("web", "site", 80)},
		}}),
	)
	res := build(t, gw, Inputs{}, inferenceOn)
	check := func(owner string, cs *corev3.ConfigSource) {
		t.Helper()
		if cs.GetAds() == nil {
			t.Errorf("%s: config source is not ADS", owner)
		}
		if d := cs.GetInitialFetchTimeout(); d == nil || d.AsDuration() != 0 {
			t.Errorf("%s: initial_fetch_timeout %v, want 0 (wait for it)", owner, d)
		}
	}
	if len(res.Clusters) < 3 {
		t.Fatalf("want the pool, EPP and Service clusters, got %d", len(res.Clusters))
	}
	for _, c := range res.Clusters {
		check("cluster "+c.GetName()+" eds_config", c.GetEdsClusterConfig().GetEdsConfig())
	}
	n := 0
	for _, l := range res.Listeners {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
					t.Fatal(err)
				}
				check("listener "+l.GetName()+" rds", hcm.GetRds().GetConfigSource())
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no HCM found")
	}
}
