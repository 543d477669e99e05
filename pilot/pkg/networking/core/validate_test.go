// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// clone deep-copies every resource so a test can break one.
func clone(res Resources) Resources {
	var out Resources
	for _, m := range res.Listeners {
		out.Listeners = append(out.Listeners, proto.Clone(m).(*listenerv3.Listener))
	}
	for _, m := range res.Routes {
		out.Routes = append(out.Routes, proto.Clone(m).(*routev3.RouteConfiguration))
	}
	for _, m := range res.Clusters {
		out.Clusters = append(out.Clusters, proto.Clone(m).(*clusterv3.Cluster))
	}
	for _, m := range res.Endpoints {
		out.Endpoints = append(out.Endpoints, proto.Clone(m).(*endpointv3.ClusterLoadAssignment))
	}
	return out
}

func TestValidateCatches(t *testing.T) {
	good := build(t, seedGateway(), seedInputs(), inferenceOn)
	for _, tc := range []struct {
		name   string
		mutate func(*Resources)
		want   string
	}{
		{"missing RDS", func(r *Resources) { r.Routes = nil }, `route configuration "http.80" is not in RDS`},
		{"missing EPP cluster", func(r *Resources) { r.Clusters = r.Clusters[:1] }, `cluster "` + seedEPPCluster + `" is not in CDS`},
		{"missing route cluster", func(r *Resources) { r.Clusters = r.Clusters[1:] }, `cluster "` + seedShadowCluster + `" is not in CDS`},
		{"missing assignment", func(r *Resources) { r.Endpoints = r.Endpoints[1:] }, "no ClusterLoadAssignment"},
		{"duplicate cluster", func(r *Resources) { r.Clusters = append(r.Clusters, r.Clusters[0]) }, "duplicate name"},
		{"invalid resource", func(r *Resources) { r.Routes[0].VirtualHosts[0].Domains = nil }, "Domains"},
		{"host header add", func(r *Resources) {
			rt := r.Routes[0].VirtualHosts[0].Routes[0]
			rt.RequestHeadersToAdd = append(rt.RequestHeadersToAdd, addOption("host", "x.internal"))
		}, `request header "host": :-prefixed or host headers may not be modified`},
		{"Host response header add on a virtual host", func(r *Resources) {
			r.Routes[0].VirtualHosts[0].ResponseHeadersToAdd = []*corev3.HeaderValueOption{addOption("Host", "x")}
		}, `virtual host "llm.ssup2.com:80": response header "Host": :-prefixed or host headers may not be modified`},
		{"pseudo-header remove on the route configuration", func(r *Resources) {
			r.Routes[0].RequestHeadersToRemove = []string{":path"}
		}, `route configuration "http.80": request header ":path": :-prefixed or host headers may not be removed`},
		{"host remove on a weighted cluster", func(r *Resources) {
			ra := r.Routes[0].VirtualHosts[0].Routes[0].GetRoute()
			ra.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{{
				Name: seedShadowCluster, Weight: wrapperspb.UInt32(1), RequestHeadersToRemove: []string{"HOST"},
			}}}}
		}, `weighted cluster "` + seedShadowCluster + `": request header "HOST": :-prefixed or host headers may not be removed`},
		{"unescaped percent", func(r *Resources) {
			rt := r.Routes[0].VirtualHosts[0].Routes[0]
			rt.ResponseHeadersToAdd = append(rt.ResponseHeadersToAdd, addOption("x-discount", "100%"))
		}, `response header "x-discount": unescaped '%' (Envoy: "Incorrect configuration: 100%. Couldn't find valid command at position 3")`},
		{"formatter command", func(r *Resources) {
			rt := r.Routes[0].VirtualHosts[0].Routes[0]
			rt.RequestHeadersToAdd = append(rt.RequestHeadersToAdd, addOption("x-start", "%START_TIME%"))
		}, `request header "x-start": formatter command %START_TIME%`},
		{"invalid packed config", func(r *Resources) {
			// stat_prefix is required in the HCM, which sits in an Any:
			// plain ValidateAll on the listener does not see it.
			f := r.Listeners[0].FilterChains[0].Filters[0]
			h := &hcmv3.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
				t.Fatal(err)
			}
			h.StatPrefix = ""
			a, err := toAny(h)
			if err != nil {
				t.Fatal(err)
			}
			f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
		}, "StatPrefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := clone(good)
			tc.mutate(&r)
			err := Validate(r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	assertValid(t, good)
	escaped := clone(good)
	rt := escaped.Routes[0].VirtualHosts[0].Routes[0]
	rt.RequestHeadersToAdd = append(rt.RequestHeadersToAdd, addOption("x-discount", "100%%"))
	assertValid(t, escaped)
}

// addOption is a headers_to_add entry of k: v.
func addOption(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}}
}
