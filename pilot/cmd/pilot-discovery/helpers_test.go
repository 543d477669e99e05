// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Seed names, written out.
const (
	seedGateway       = "gateway-namespace/gateway"
	seedShadowCluster = "outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local"
	seedEPPCluster    = "outbound|9002||vllm-llama3-8b-epp.llm-namespace.svc.cluster.local"
)

// seedModel is the seed's Gateway as the controller translates it:
// listener http:80, HTTPRoute llm-namespace/llm-route (llm.ssup2.com,
// PathPrefix /) to pool vllm-llama3-8b, EPP vllm-llama3-8b-epp:9002
// FailOpen.
func seedModel() model.Gateway { return seedmodel.Gateway() }

// seedEndpoints are the model servers 10.244.0.13-15:8000 and the EPP pod.
func seedEndpoints() []model.ClusterEndpoints {
	return []model.ClusterEndpoints{
		{Cluster: seedShadowCluster, Endpoints: []model.Endpoint{
			{Address: "10.244.0.15", Port: 8000}, {Address: "10.244.0.13", Port: 8000}, {Address: "10.244.0.14", Port: 8000},
		}},
		{Cluster: seedEPPCluster, Endpoints: []model.Endpoint{{Address: "10.244.0.16", Port: 9002}}},
	}
}

// seedTranslate are the translator options the in-process server uses.
var seedTranslate = core.Options{InferenceEnabled: true}

// xdsEnv is an in-process xds.Server over static collections, serving ADS
// on 127.0.0.1 and its debug handler over httptest.
type xdsEnv struct {
	ads  string
	http *httptest.Server
}

// startXDS runs an xds.Server with the seed Gateway and its endpoints;
// grpcOpts go to grpc.NewServer. Everything stops at test cleanup.
func startXDS(t *testing.T, grpcOpts ...grpc.ServerOption) *xdsEnv {
	t.Helper()
	stop := make(chan struct{})
	gws := krt.NewStaticCollection(nil, []model.Gateway{seedModel()}, krt.WithStop(stop))
	eps := krt.NewStaticCollection(nil, seedEndpoints(), krt.WithStop(stop))
	srv, err := xds.NewServer(xds.Config{
		Gateways: gws, Endpoints: eps, Translate: seedTranslate,
		Debounce: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), GRPCOptions: grpcOpts,
	})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, lis) }()
	e := &xdsEnv{ads: lis.Addr().String(), http: httptest.NewServer(srv.Handler())}
	t.Cleanup(func() {
		e.http.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("xds Run: %v", err)
		}
		close(stop)
	})
	return e
}

// servedAddrs are the addresses a running discovery command serves on.
type servedAddrs struct{ ADS, HTTP, Debug net.Addr }

// startDiscovery runs the command tree with args (a discovery command) on
// d until the test ends, when it is cancelled and must end without error,
// and returns the addresses it serves on once it serves (d.serving is
// replaced to learn them).
func startDiscovery(t *testing.T, d deps, args ...string) servedAddrs {
	t.Helper()
	addrs := make(chan servedAddrs, 1)
	d.serving = func(ads, http, debug net.Addr) { addrs <- servedAddrs{ads, http, debug} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		cmd := newRootCommandWith(d)
		cmd.SetArgs(args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		done <- cmd.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("discovery: %v", err)
		}
	})
	select {
	case a := <-addrs:
		return a
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("discovery ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("discovery did not start serving")
	}
	return servedAddrs{}
}

// run executes the command tree with args and returns stdout and the error.
func run(t *testing.T, d deps, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommandWith(d)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// wantErr fails unless err contains every fragment.
func wantErr(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q lacks %q", err, f)
		}
	}
}

// envOf is a lookupEnv over kv pairs.
func envOf(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}
