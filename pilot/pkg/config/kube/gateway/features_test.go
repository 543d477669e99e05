// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"slices"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// TestSupportedFeatures: status.supportedFeatures is sorted by name and
// unique (the field's rule), names only features the Gateway API knows,
// and claims ListenerSet with the others: 45, the 42 features of
// GATEWAY-HTTP and GATEWAY-GRPC the v1.6.1 suite passed less the two
// v1.7.0 removed (HTTPRouteRetry, HTTPRouteRetryBackendTimeout), plus the
// five v1.7.0 features whose tests passed; 49 with GATEWAY-TLS and
// GATEWAY-TCP's TLSRoute, TLSRouteModeTerminate, TLSRouteModeMixed and
// TCPRoute; never GatewayListenerFilters, which infermesh refuses
// (conformance/README.md).
func TestSupportedFeatures(t *testing.T) {
	if !slices.IsSortedFunc(SupportedFeatures, func(a, b gwv1.SupportedFeature) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	}) {
		t.Error("not sorted by name")
	}
	known := map[features.FeatureName]bool{}
	for f := range features.AllFeatures {
		known[f.Name] = true
	}
	seen := map[gwv1.FeatureName]bool{}
	for _, f := range SupportedFeatures {
		if seen[f.Name] {
			t.Errorf("%s twice", f.Name)
		}
		seen[f.Name] = true
		if !known[features.FeatureName(f.Name)] {
			t.Errorf("%s is not a Gateway API feature", f.Name)
		}
	}
	if !seen[gwv1.FeatureName(features.SupportListenerSet)] {
		t.Error("ListenerSet is not claimed")
	}
	if seen[gwv1.FeatureName(features.SupportGatewayListenerFilters)] {
		t.Error("GatewayListenerFilters is claimed, but listeners with filters are refused")
	}
	if len(SupportedFeatures) != 49 {
		t.Errorf("%d features, want 49", len(SupportedFeatures))
	}
}
