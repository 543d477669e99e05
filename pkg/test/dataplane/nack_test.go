// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"net"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

// A route configuration with a field the data plane does not implement is
// NACKed on the wire: the ADS server sees error_detail naming the field,
// and the listener waiting for it never warms.
func TestNACKOnUnimplementedField(t *testing.T) {
	ctx := testCtx(t)
	snaps := cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	nacks := make(chan string, 8)
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoverygrpc.DiscoveryRequest) error {
		if r.GetErrorDetail() != nil {
			select {
			case nacks <- r.GetErrorDetail().GetMessage():
			default:
			}
		}
		return nil
	}}
	srvCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gs := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(srvCtx, snaps, cb))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	bad := rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{
		Match: prefix("/"),
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}, IdleTimeout: durationpb.New(1e9),
		}},
	}}})
	snap, err := cachev3.NewSnapshot("1", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {seedListener(t)},
		resourcev3.RouteType:    {bad},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := snaps.SetSnapshot(ctx, "gw-0", snap); err != nil {
		t.Fatal(err)
	}
	dp, err := New(testBootstrap(t, lis.Addr().String(), false), Options{ListenerAddress: func(uint32) string { return "127.0.0.1:0" }})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dp.Run(runCtx) }()
	defer func() { stop(); <-done }()

	const field = "envoy.config.route.v3.RouteAction.idle_timeout"
	select {
	case msg := <-nacks:
		if !strings.Contains(msg, field) {
			t.Fatalf("NACK %q does not name %s", msg, field)
		}
	case <-ctx.Done():
		t.Fatal("no NACK reached the server")
	}
	if err := dp.WaitFor(ctx, func(s Snapshot) bool { return s.LastNACK != nil }); err != nil {
		t.Fatal(err)
	}
	s := dp.Snapshot()
	if s.LastNACK.TypeURL != resourcev3.RouteType || s.Counters.NACKs < 1 || s.Listeners["0.0.0.0_80"] != nil {
		t.Fatalf("snapshot after NACK: %+v, listeners %v", s.LastNACK, s.Listeners)
	}
}
