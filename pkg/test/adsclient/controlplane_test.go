// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package adsclient

import (
	"context"
	"net"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// wait bounds every receive that must succeed.
const wait = 10 * time.Second

// controlPlane is go-control-plane's ADS server over a snapshot cache on
// loopback; every request it reads goes to sotw or delta.
type controlPlane struct {
	addr  string
	cache cachev3.SnapshotCache
	sotw  chan *discoveryv3.DiscoveryRequest
	delta chan *discoveryv3.DeltaDiscoveryRequest
}

func startControlPlane(t *testing.T, opts ...grpc.ServerOption) *controlPlane {
	t.Helper()
	cp := &controlPlane{cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil),
		sotw: make(chan *discoveryv3.DiscoveryRequest, 64), delta: make(chan *discoveryv3.DeltaDiscoveryRequest, 64)}
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, cp.cache, nil)
	// Requests are recorded as they come off the wire (go-control-plane
	// fills in the node of later requests before its callbacks run).
	record := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &recorder{ServerStream: ss, cp: cp})
	}
	g := grpc.NewServer(append(opts, grpc.ChainStreamInterceptor(record))...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(lis) }()
	t.Cleanup(func() { cancel(); g.Stop(); <-done })
	cp.addr = lis.Addr().String()
	return cp
}

// recorder copies every request read to its control plane's channels.
type recorder struct {
	grpc.ServerStream
	cp *controlPlane
}

func (r *recorder) RecvMsg(m any) error {
	if err := r.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	switch req := m.(type) {
	case *discoveryv3.DiscoveryRequest:
		r.cp.sotw <- proto.CloneOf(req)
	case *discoveryv3.DeltaDiscoveryRequest:
		r.cp.delta <- proto.CloneOf(req)
	}
	return nil
}

// set publishes version for node id: clusters by name, and an assignment
// per cluster with one endpoint at 10.0.0.1:port.
func (cp *controlPlane) set(t *testing.T, id, version string, clusters ...string) {
	t.Helper()
	res := map[resourcev3.Type][]types.Resource{}
	for i, c := range clusters {
		res[resourcev3.ClusterType] = append(res[resourcev3.ClusterType], &clusterv3.Cluster{Name: c,
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}})
		res[resourcev3.EndpointType] = append(res[resourcev3.EndpointType], assignment(c, 8000+i))
	}
	snap, err := cachev3.NewSnapshot(version, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), id, snap); err != nil {
		t.Fatal(err)
	}
}

func assignment(cluster string, port int) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: cluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}}}}}}}},
	}}}
}

// next returns the next request the server read from ch.
func next[R any](t *testing.T, ch chan R) R {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(wait):
		t.Fatal("the server read no request")
	}
	var none R
	return none
}
