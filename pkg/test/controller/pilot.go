// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"net"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/client-go/rest"

	"github.com/infermesh/infermesh/pilot/pkg/bootstrap"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/kube"
)

// StartPilot runs all of pilot-discovery in process (bootstrap.Server:
// controller, registry, ADS) against the cluster cfg points to, always
// leading, with the inference extension on and pushes coalesced by debounce
// and maxDelay. It serves plaintext ADS on a loopback port and returns a
// gRPC connection to it; everything stops when the test ends.
func StartPilot(t testing.TB, cfg *rest.Config, debounce, maxDelay time.Duration, opts ...kube.Option) *grpc.ClientConn {
	t.Helper()
	f := features.Defaults()
	f.EnableInferenceExtension = true
	client, err := kube.NewFromRESTConfig(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bootstrap.NewServer(bootstrap.Args{Client: client, Features: f, IsLeader: func() bool { return true },
		Debounce: debounce, MaxDelay: maxDelay})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, lis, nil, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pilot: %v", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// ProxyNode is the xDS node of a proxy of Gateway ns/name: its metadata
// carries the keys the ADS server maps to the Gateway.
func ProxyNode(id, ns, name string) *corev3.Node {
	md, err := structpb.NewStruct(map[string]any{xds.MetadataGatewayNamespace: ns, xds.MetadataGatewayName: name})
	if err != nil {
		panic(err) // two strings always convert
	}
	return &corev3.Node{Id: id, Metadata: md}
}
