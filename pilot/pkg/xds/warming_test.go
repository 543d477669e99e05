// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"bytes"
	"sync/atomic"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
)

// replaceEPPCluster changes the seed EPP cluster's content (a
// DestinationRule on the EPP host turning TLS on) and nothing else: its
// endpoints stay as they are.
func replaceEPPCluster(e *env) {
	e.gateways.UpdateObject(seedmodel.GatewayEPPTLS(model.EPPTLS{InsecureSkipVerify: true}))
}

// TestSotWReplacedClusterGetsItsAssignmentAgain: when CDS replaces the EPP
// cluster, Envoy warms the new cluster and waits for a ClusterLoadAssignment
// it receives after that; its SotW re-request looks like an ACK. The stream
// must get the EPP's unchanged assignment again, after the CDS response,
// and only that one.
func TestSotWReplacedClusterGetsItsAssignmentAgain(t *testing.T) {
	e := seedEnv(t, envOptions{})
	c := e.sotw(seedNode())
	eds := []string{seedShadowCluster, seedEPPCluster}
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	cds := c.recv()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, VersionInfo: cds.GetVersionInfo(), ResponseNonce: cds.GetNonce()})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: eds})
	first := c.recv()
	before := assignmentBytes(t, first.GetResources(), seedEPPCluster)
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: eds, VersionInfo: first.GetVersionInfo(), ResponseNonce: first.GetNonce()})
	c.quiet("after the ACKs")

	replaceEPPCluster(e)
	cds2 := c.recv()
	if cds2.GetTypeUrl() != resourcev3.ClusterType {
		t.Fatalf("want the CDS response first, got %s", cds2.GetTypeUrl())
	}
	// What Envoy sends when the new cluster's EDS watch starts: the names,
	// version and nonce of its last EDS ACK.
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: eds, VersionInfo: first.GetVersionInfo(), ResponseNonce: first.GetNonce()})
	r := c.recv()
	if r.GetTypeUrl() != resourcev3.EndpointType || len(r.GetResources()) != 1 {
		t.Fatalf("after the EPP cluster was replaced: want one ClusterLoadAssignment, got %s with %d resources", r.GetTypeUrl(), len(r.GetResources()))
	}
	if got := assignmentBytes(t, r.GetResources(), seedEPPCluster); !bytes.Equal(got, before) {
		t.Fatal("the EPP assignment sent again differs from the first one; the endpoints did not change")
	}
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: eds, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, VersionInfo: cds2.GetVersionInfo(), ResponseNonce: cds2.GetNonce()})
	c.quiet("after the re-warmed cluster's assignment was acked")
}

// TestDeltaReplacedClusterGetsItsAssignmentAgain: on a delta stream Envoy
// sends nothing when a replaced cluster's EDS watch starts (the name is
// already subscribed), so the server alone must send the assignment again.
func TestDeltaReplacedClusterGetsItsAssignmentAgain(t *testing.T) {
	e := seedEnv(t, envOptions{})
	d := e.delta(seedNode())
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	r := d.recv()
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: r.GetNonce()})
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{seedShadowCluster, seedEPPCluster}})
	r = d.recv()
	before := assignmentBytes(t, deltaAnys(r), seedEPPCluster)
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: r.GetNonce()})
	d.quiet("after the ACKs")

	replaceEPPCluster(e)
	cds := d.recv()
	if cds.GetTypeUrl() != resourcev3.ClusterType || len(cds.GetResources()) != 1 || cds.GetResources()[0].GetName() != seedEPPCluster {
		t.Fatalf("want the EPP cluster in CDS first, got %s with %d resources", cds.GetTypeUrl(), len(cds.GetResources()))
	}
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: cds.GetNonce()})
	eds := d.recv()
	if eds.GetTypeUrl() != resourcev3.EndpointType || len(eds.GetResources()) != 1 {
		t.Fatalf("after the EPP cluster was replaced: want one ClusterLoadAssignment, got %s with %d resources", eds.GetTypeUrl(), len(eds.GetResources()))
	}
	if got := assignmentBytes(t, deltaAnys(eds), seedEPPCluster); !bytes.Equal(got, before) {
		t.Fatal("the EPP assignment sent again differs from the first one; the endpoints did not change")
	}
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: eds.GetNonce()})
	d.quiet("after the re-warmed cluster's assignment was acked")
}

// TestDeltaChangedRdsGetsItsRouteConfigurationAgain: Envoy keys RDS
// subscriptions by the HCM's whole Rds message, so a listener whose Rds
// changes (here its config source's initial_fetch_timeout) waits for a
// RouteConfiguration received after that; the server sends it again.
func TestDeltaChangedRdsGetsItsRouteConfigurationAgain(t *testing.T) {
	var changeRds atomic.Bool
	e := seedEnv(t, envOptions{mutate: func(gw string, res *core.Resources) {
		if gw == seedGatewayKey && changeRds.Load() {
			setRdsFetchTimeout(t, res.Listeners)
		}
	}})
	d := e.delta(seedNode())
	got := deltaSubscribe(t, d, []string{seedShadowCluster, seedEPPCluster}, []string{"http.80"})
	if len(got[resourcev3.RouteType]) != 1 {
		t.Fatalf("initial RDS: %v", got[resourcev3.RouteType])
	}
	d.quiet("after the ACKs")
	changeRds.Store(true)
	replaceEPPCluster(e) // any change that translates the Gateway again
	// Expect CDS (the EPP cluster), EDS (its assignment), LDS (the
	// listener), then RDS: http.80 again, though it did not change.
	seen := map[string][]string{}
	for {
		r, err := d.s.Recv(recvTimeout)
		if err != nil {
			t.Fatalf("after the listener's Rds changed, http.80 was not sent again; the stream got %v (%v)", seen, err)
		}
		for _, res := range r.GetResources() {
			seen[r.GetTypeUrl()] = append(seen[r.GetTypeUrl()], res.GetName())
		}
		d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
		if r.GetTypeUrl() == resourcev3.RouteType {
			if len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != "http.80" {
				t.Fatalf("want http.80 again, got %v", seen[resourcev3.RouteType])
			}
			return
		}
	}
}

func setRdsFetchTimeout(t *testing.T, ls []*listenerv3.Listener) {
	t.Helper()
	for _, l := range ls {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
					continue
				}
				hcm.GetRds().GetConfigSource().InitialFetchTimeout = durationpb.New(7)
				a, err := anypb.New(&hcm)
				if err != nil {
					t.Error(err)
					return
				}
				f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
			}
		}
	}
}

// assignmentBytes is the serialized ClusterLoadAssignment named name
// among as; the test fails without one.
func assignmentBytes(t *testing.T, as []*anypb.Any, name string) []byte {
	t.Helper()
	for _, a := range as {
		var cla endpointv3.ClusterLoadAssignment
		if err := a.UnmarshalTo(&cla); err != nil {
			t.Fatal(err)
		}
		if cla.GetClusterName() == name {
			return a.GetValue()
		}
	}
	t.Fatalf("no ClusterLoadAssignment %s among %d resources", name, len(as))
	return nil
}

func deltaAnys(r *discoveryv3.DeltaDiscoveryResponse) []*anypb.Any {
	var out []*anypb.Any
	for _, res := range r.GetResources() {
		out = append(out, res.GetResource())
	}
	return out
}
