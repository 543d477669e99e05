// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
)

// TestDeltaNACKNotResent: on a delta stream a NACK is not answered with the
// same resources; the next change is sent.
func TestDeltaNACKNotResent(t *testing.T) {
	e := seedEnv(t, envOptions{})
	d := e.delta(seedNode())
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	r := d.recv()
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: r.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Message: "rejected by test"}})
	d.quiet("after a NACK")
	if n := counterValue(t, e, "infermesh_xds_nacks_total", "cds"); n != 1 {
		t.Errorf("nacks_total{cds} = %v", n)
	}
	e.gateways.UpdateObject(seedmodel.GatewayEPPTLS(model.EPPTLS{InsecureSkipVerify: true}))
	r2 := d.recv()
	if len(r2.GetResources()) != 1 || r2.GetResources()[0].GetName() != seedEPPCluster {
		t.Fatalf("want only the EPP cluster, got %d resources", len(r2.GetResources()))
	}
}

// TestDeltaRemoved: a cluster the Gateway stops using is sent as removed.
func TestDeltaRemoved(t *testing.T) {
	e := seedEnv(t, envOptions{})
	d := e.delta(seedNode())
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	r := d.recv()
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: r.GetNonce()})
	// The seed's route now goes to the other Gateway's pool.
	gw := seedmodel.GatewayWith("gateway-namespace", "gateway", "llm-namespace", "llm-route", "llm.ssup2.com", otherGateway().Listeners[0].Routes[0].Rules[0].Backends[0].Pool)
	e.gateways.UpdateObject(gw)
	r2 := d.recv()
	var names []string
	for _, res := range r2.GetResources() {
		names = append(names, res.GetName())
	}
	if diff := cmp.Diff([]string{otherShadowCluster, otherEPPCluster}, names); diff != "" {
		t.Errorf("added (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{seedShadowCluster, seedEPPCluster}, r2.GetRemovedResources()); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
}

// TestEndpointsDeletedServeEmptyAssignment: when a used cluster's endpoints
// disappear, its proxies get an empty ClusterLoadAssignment (not a removal:
// the cluster still exists); deleting the Gateway sends its proxies nothing.
func TestEndpointsDeletedServeEmptyAssignment(t *testing.T) {
	e := seedEnv(t, envOptions{})
	d := e.delta(seedNode())
	deltaSubscribe(t, d, []string{seedShadowCluster, seedEPPCluster}, []string{"http.80"})
	e.endpoints.DeleteObject(seedShadowCluster)
	r := d.recv()
	if r.GetTypeUrl() != resourcev3.EndpointType || len(r.GetResources()) != 1 || len(r.GetRemovedResources()) != 0 {
		t.Fatalf("got %s with %d resources, removed %v", r.GetTypeUrl(), len(r.GetResources()), r.GetRemovedResources())
	}
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := r.GetResources()[0].GetResource().UnmarshalTo(cla); err != nil {
		t.Fatal(err)
	}
	if cla.GetClusterName() != seedShadowCluster || len(cla.GetEndpoints()) != 0 {
		t.Fatalf("want an empty assignment for the shadow cluster, got %v", cla)
	}
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: r.GetNonce()})
	e.gateways.DeleteObject(seedGatewayKey)
	d.quiet("a deleted Gateway")
	if _, ok, _ := e.srv.ConfigDump(seedGatewayKey); ok {
		t.Error("config_dump still has the deleted Gateway")
	}
}
