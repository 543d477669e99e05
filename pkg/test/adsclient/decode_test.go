// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package adsclient

import (
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestDecode: the typed helpers refuse a resource of another type, and
// Validate looks inside an Any.
func TestDecode(t *testing.T) {
	cla, err := anypb.New(assignment("a", 8000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Clusters([]*anypb.Any{cla}); err == nil {
		t.Error("Clusters decoded a ClusterLoadAssignment")
	}
	if got, err := Assignments([]*anypb.Any{cla}); err != nil || len(got) != 1 || got[0].GetClusterName() != "a" {
		t.Errorf("Assignments = %v, %v", got, err)
	}
	listener := func(statPrefix string) *listenerv3.Listener {
		hcm, err := anypb.New(&hcmv3.HttpConnectionManager{StatPrefix: statPrefix,
			RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "r"}}})
		if err != nil {
			t.Fatal(err)
		}
		return &listenerv3.Listener{Name: "l", FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}}}}}
	}
	if err := Validate(listener("http")); err != nil {
		t.Errorf("a valid listener: %v", err)
	}
	// stat_prefix is required (min_len 1) inside the packed HCM only.
	if err := Validate(listener("")); err == nil || !strings.Contains(err.Error(), "StatPrefix") {
		t.Errorf("an HCM without stat_prefix inside the listener: %v, want a StatPrefix error", err)
	}
}
