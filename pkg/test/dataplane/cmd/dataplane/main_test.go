// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/bootstrap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseArgs(t *testing.T) {
	good := []struct {
		argv []string
		want args
	}{
		{[]string{"-c", "/etc/envoy/bootstrap.json", "--service-node", "gw-abc.ns"}, args{"/etc/envoy/bootstrap.json", "gw-abc.ns"}},
		{[]string{"--config-path", "b.json"}, args{configPath: "b.json"}},
		{[]string{"--service-node", "n", "-c", "b"}, args{"b", "n"}}, // no extension: Envoy reads JSON
	}
	for _, tc := range good {
		got, err := parseArgs(tc.argv)
		if err != nil || got != tc.want {
			t.Errorf("parseArgs(%q) = %+v, %v; want %+v", tc.argv, got, err, tc.want)
		}
	}
	bad := []struct {
		argv []string
		want string // in the error
	}{
		{nil, "-c/--config-path is required"},
		{[]string{"--service-node", "n"}, "-c/--config-path is required"},
		{[]string{"-c", "b.json", "--concurrency", "2"}, "Envoy flag --concurrency is not implemented"},
		{[]string{"-c", "b.json", "-l", "debug"}, "Envoy flag -l is not implemented"},
		{[]string{"-c", "b.json", "--service-cluster", "gw"}, "Envoy flag --service-cluster is not implemented"},
		{[]string{"-c", "b.json", "--log-level=debug"}, "Envoy flag --log-level is not implemented"},
		{[]string{"-c", "b.json", "--no-such-flag"}, "unknown flag --no-such-flag"},
		{[]string{"-c", "b.json", "extra"}, `unexpected argument "extra"`},
		{[]string{"--config-path=b.json"}, "as two arguments"},
		{[]string{"-c", "a.json", "--config-path", "b.json"}, "given more than once"},
		{[]string{"-c"}, "-c needs a value"},
		{[]string{"-c", "b.json", "--service-node"}, "--service-node needs a value"},
		{[]string{"-c", "/etc/envoy/bootstrap.yaml"}, "only a JSON bootstrap is implemented"},
		{[]string{"-c", "b.pb"}, "only a JSON bootstrap is implemented"},
	}
	for _, tc := range bad {
		_, err := parseArgs(tc.argv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseArgs(%q) error = %v, want one containing %q", tc.argv, err, tc.want)
		}
	}
}

// The command starts from a bootstrap file as the Gateway Deployment's
// container does (-c FILE --service-node ID): it asks the ADS server as the
// node ID (not the bootstrap's node id), binds the listener it receives at
// the listener's own address and port, serves it, and returns nil when
// stopped.
func TestRunServesListenerFromBootstrapFile(t *testing.T) {
	const node = "gw-7d9f-x2x.gateway-namespace"
	port := freePort(t)
	ads, nodes := startADS(t, node, port)

	// Free admin and status ports: the bootstrap's defaults (15000, 15021)
	// are bound on the host and may be taken by anything else running.
	boot, err := bootstrap.JSON(bootstrap.Config{
		NodeID: "bootstrap-node", Cluster: "gateway", GatewayNamespace: "gateway-namespace", GatewayName: "gateway",
		XDSAddress: ads, Plaintext: true, AdminPort: freePort(t), StatusPort: freePort(t),
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

	// The seed's listener has one virtual host, llm.ssup2.com: any other
	// host gets the connection manager's 404, from our listener only. The
	// listener's address is 0.0.0.0, so 127.0.0.2 reaches it too (a listener
	// bound to 127.0.0.1 only would not).
	url := fmt.Sprintf("http://127.0.0.2:%d/", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, err := getStatus(url, "other.example")
		if err == nil {
			if status != http.StatusNotFound {
				t.Fatalf("GET %s (Host other.example) = %d, want 404 from the data plane", url, status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listener on port %d after 20 s (last error %v); log:\n%s", port, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := nodes(); len(got) == 0 || got[0] != node {
		t.Fatalf("ADS requests came from nodes %q, want %q (--service-node)", got, node)
	}
}

// startADS serves, for node only, the seed Gateway with its listener on
// port, from a go-control-plane snapshot cache; it returns its address and
// the node ids of the requests it received.
func startADS(t *testing.T, node string, port uint32) (string, func() []string) {
	t.Helper()
	gw := seedmodel.Gateway()
	gw.Listeners[0].Port = port
	res, err := core.BuildGateway(&gw, core.Inputs{}, core.Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	snapshot := map[resourcev3.Type][]types.Resource{}
	for _, l := range res.Listeners {
		snapshot[resourcev3.ListenerType] = append(snapshot[resourcev3.ListenerType], l)
	}
	for _, r := range res.Routes {
		snapshot[resourcev3.RouteType] = append(snapshot[resourcev3.RouteType], r)
	}
	snap, err := cachev3.NewSnapshot("1", snapshot)
	if err != nil {
		t.Fatal(err)
	}
	cache := cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	if err := cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var nodes []string
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoverygrpc.DiscoveryRequest) error {
		if id := r.GetNode().GetId(); id != "" {
			mu.Lock()
			nodes = append(nodes, id)
			mu.Unlock()
		}
		return nil
	}}
	srvCtx, cancel := context.WithCancel(context.Background())
	gs := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(srvCtx, cache, cb))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); cancel() })
	return lis.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), nodes...)
	}
}

// freePort is a TCP port that was free on every address a moment ago.
func freePort(t *testing.T) uint32 {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint32(l.Addr().(*net.TCPAddr).Port)
}

func getStatus(url, host string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Host = host
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// syncBuffer is a bytes.Buffer safe for the logger's writes and the test's read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
