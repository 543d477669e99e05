// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/bootstrap"
)

// The Gateway Deployment's readiness probe (GET /healthz/ready on the
// status port, pilot/pkg/config/kube/gateway/deployment.go) against the
// command started from the bootstrap pkg/bootstrap writes, as Envoy would
// answer it:
//
//   - before the cluster manager is initialized (no CDS yet), the admin's
//     /ready is 503 PRE_INITIALIZING, and the status listener does not
//     accept connections (Envoy listen()s on a static listener's socket only
//     when it starts its workers, after initialization);
//   - with the clusters warm but a listener still waiting for its routes,
//     503 INITIALIZING, status port still closed;
//   - once the listener has its routes: the probe path answers 200 "LIVE\n"
//     through the status listener, its route and the admin cluster.
func TestRunReadinessProbeFollowsInitialization(t *testing.T) {
	const node = "gw-7d9f-x2x.gateway-namespace"
	gwPort, adminPort, statusPort := freePort(t), freePort(t), freePort(t)
	ads, cache := startEmptyADS(t)
	full, noRoutes := seedSnapshots(t, gwPort)

	boot, err := bootstrap.JSON(bootstrap.Config{
		NodeID: "bootstrap-node", Cluster: "gateway", GatewayNamespace: "gateway-namespace", GatewayName: "gateway",
		XDSAddress: ads, Plaintext: true, AdminPort: adminPort, StatusPort: statusPort,
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := os.WriteFile(file, boot, 0o444); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-c", file, "--service-node", node}, &logs) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run returned %v after stop, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not return within 10 s of stop")
		}
	}()

	admin := fmt.Sprintf("http://127.0.0.1:%d/ready", adminPort)
	probe := fmt.Sprintf("http://127.0.0.2:%d%s", statusPort, bootstrap.ReadyPath) // the status listener is on 0.0.0.0
	waitFor(t, &logs, admin, http.StatusServiceUnavailable, "PRE_INITIALIZING\n")
	if code, body, err := get(probe); err == nil {
		t.Fatalf("probe %s answered %d %q before initialization; want the connection refused", probe, code, body)
	}

	if err := cache.SetSnapshot(context.Background(), node, noRoutes); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &logs, admin, http.StatusServiceUnavailable, "INITIALIZING\n")
	if code, body, err := get(probe); err == nil {
		t.Fatalf("probe %s answered %d %q while a listener waits for its routes; want the connection refused", probe, code, body)
	}

	if err := cache.SetSnapshot(context.Background(), node, full); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &logs, probe, http.StatusOK, "LIVE\n")
	if code, body, err := get(admin); err != nil || code != http.StatusOK || body != "LIVE\n" {
		t.Errorf("admin /ready = %d %q, %v; want 200 \"LIVE\\n\"", code, body, err)
	}
	// The status listener serves only its route; the admin's other paths
	// are not implemented (404), and the admin is not on the pod address.
	if code, _, err := get(fmt.Sprintf("http://127.0.0.2:%d/ready", statusPort)); err != nil || code != http.StatusNotFound {
		t.Errorf("status listener /ready = %d, %v; want 404 (no route)", code, err)
	}
	if code, _, err := get(fmt.Sprintf("http://127.0.0.1:%d/stats", adminPort)); err != nil || code != http.StatusNotFound {
		t.Errorf("admin /stats = %d, %v; want 404 (not implemented)", code, err)
	}
	if _, _, err := get(fmt.Sprintf("http://127.0.0.2:%d/ready", adminPort)); err == nil {
		t.Errorf("admin answered on 127.0.0.2; the bootstrap binds it to 127.0.0.1 only")
	}
}

// waitFor polls url until it answers code with body, for up to 20 s.
func waitFor(t *testing.T, logs *syncBuffer, url string, code int, body string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, b, err := get(url)
		if err == nil && c == code && b == body {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s = %d %q (error %v) after 20 s, want %d %q; log:\n%s", url, c, b, err, code, body, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(url string) (int, string, error) {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// startEmptyADS serves ADS from a snapshot cache that holds nothing yet.
func startEmptyADS(t *testing.T) (string, cachev3.SnapshotCache) {
	t.Helper()
	cache := cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	srvCtx, cancel := context.WithCancel(context.Background())
	gs := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(srvCtx, cache, nil))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); cancel() })
	return lis.Addr().String(), cache
}

// seedSnapshots are the seed Gateway with its listener on port: full, and
// the same without route configurations (version 1; full is version 2).
// Every cluster has an assignment, so that none waits for its initial
// fetch timeout.
func seedSnapshots(t *testing.T, port uint32) (full, noRoutes *cachev3.Snapshot) {
	t.Helper()
	gw := seedmodel.Gateway()
	gw.Listeners[0].Port = port
	res, err := core.BuildGateway(&gw, core.Inputs{}, core.Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	r := map[resourcev3.Type][]types.Resource{}
	have := map[string]bool{}
	for _, e := range res.Endpoints {
		r[resourcev3.EndpointType] = append(r[resourcev3.EndpointType], e)
		have[e.GetClusterName()] = true
	}
	for _, c := range res.Clusters {
		r[resourcev3.ClusterType] = append(r[resourcev3.ClusterType], c)
		if c.GetType() != clusterv3.Cluster_EDS {
			continue
		}
		eds := c.GetEdsClusterConfig().GetServiceName()
		if eds == "" {
			eds = c.GetName()
		}
		if !have[eds] {
			r[resourcev3.EndpointType] = append(r[resourcev3.EndpointType], &endpointv3.ClusterLoadAssignment{ClusterName: eds})
			have[eds] = true
		}
	}
	for _, l := range res.Listeners {
		r[resourcev3.ListenerType] = append(r[resourcev3.ListenerType], l)
	}
	noRoutes, err = cachev3.NewSnapshot("1", r)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range res.Routes {
		r[resourcev3.RouteType] = append(r[resourcev3.RouteType], rc)
	}
	full, err = cachev3.NewSnapshot("2", r)
	if err != nil {
		t.Fatal(err)
	}
	return full, noRoutes
}
