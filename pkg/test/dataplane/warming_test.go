// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// warmingCluster is an EDS cluster over ADS with the given initial fetch
// timeout (nil: unset) and connect timeout (to make versions differ).
func warmingCluster(name string, fetch *durationpb.Duration, connect time.Duration) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		ConnectTimeout: durationpb.New(connect),
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3, InitialFetchTimeout: fetch,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
	}
}

func assignment(name string, addrs ...string) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	loc := &endpointv3.LocalityLbEndpoints{}
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		var p uint32
		for _, c := range port {
			p = p*10 + uint32(c-'0')
		}
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p},
			}}},
		}}})
	}
	cla.Endpoints = []*endpointv3.LocalityLbEndpoints{loc}
	return cla
}

// TestReplacedClusterWarmsAgain: a replaced cluster is not used with the
// assignment received before it; the old one serves until an assignment
// arrives after the replacement; with initial_fetch_timeout 0 it waits.
func TestReplacedClusterWarmsAgain(t *testing.T) {
	dp := newTestDP(t, Options{})
	never := durationpb.New(0)
	load(t, dp, warmingCluster("c", never, time.Second), assignment("c", "10.0.0.1:80"))
	if s := dp.Snapshot(); s.Clusters["c"] == nil || len(s.Endpoints["c"]) != 1 {
		t.Fatalf("first cluster not warm: %v", s.Endpoints)
	}
	load(t, dp, warmingCluster("c", never, 2*time.Second))
	time.Sleep(100 * time.Millisecond) // nothing may warm it, not even time
	s := dp.Snapshot()
	if s.Clusters["c"].GetConnectTimeout().AsDuration() != time.Second || len(s.Endpoints["c"]) != 1 {
		t.Fatalf("while the replacement warms the old cluster must serve; got connect_timeout %v, endpoints %v",
			s.Clusters["c"].GetConnectTimeout().AsDuration(), s.Endpoints["c"])
	}
	load(t, dp, assignment("c", "10.0.0.1:80"))
	s = dp.Snapshot()
	if s.Clusters["c"].GetConnectTimeout().AsDuration() != 2*time.Second || len(s.Endpoints["c"]) != 1 {
		t.Fatalf("after its assignment the replacement must serve; got connect_timeout %v, endpoints %v",
			s.Clusters["c"].GetConnectTimeout().AsDuration(), s.Endpoints["c"])
	}
}

// TestInitialFetchTimeoutWarmsWithNoEndpoints: when the timeout fires
// first, the replaced cluster serves with no endpoints (503 no healthy
// upstream) until its assignment arrives; unset means Envoy's 15 s.
func TestInitialFetchTimeoutWarmsWithNoEndpoints(t *testing.T) {
	if got := initialFetchTimeout(&corev3.ConfigSource{}); got != 15*time.Second {
		t.Errorf("unset initial_fetch_timeout = %v, want Envoy's 15s", got)
	}
	dp := newTestDP(t, Options{})
	load(t, dp, warmingCluster("c", durationpb.New(50*time.Millisecond), time.Second), assignment("c", "10.0.0.1:80"))
	load(t, dp, warmingCluster("c", durationpb.New(50*time.Millisecond), 2*time.Second))
	ctx := testCtx(t)
	if err := dp.WaitFor(ctx, func(s Snapshot) bool {
		return s.Clusters["c"].GetConnectTimeout().AsDuration() == 2*time.Second
	}); err != nil {
		t.Fatal(err)
	}
	if eps := dp.Snapshot().Endpoints["c"]; len(eps) != 0 {
		t.Fatalf("a cluster warmed by the timeout has no endpoints, got %v", eps)
	}
	load(t, dp, assignment("c", "10.0.0.2:80"))
	if eps := dp.Snapshot().Endpoints["c"]; len(eps) != 1 || eps[0] != "10.0.0.2:80" {
		t.Fatalf("after its assignment: %v", eps)
	}
}
