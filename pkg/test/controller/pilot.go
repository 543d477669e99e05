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
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
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
	opts = append([]kube.Option{kube.WithAppliedFieldsOf(gateway.FieldManagers(f)...)}, opts...)
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

// GatewayPilot is the whole pilot-discovery (bootstrap.Server) in process
// as a Gateway's proxy sees it: always leader, the inference extension on,
// the Gateway deployment controller on with plaintext ADS on its own
// loopback address, which the bootstrap ConfigMaps it writes therefore
// name (PILOT_GATEWAY_XDS_ADDRESS, PILOT_GATEWAY_XDS_PLAINTEXT). Restart
// keeps that address.
type GatewayPilot struct {
	t      testing.TB
	cfg    *rest.Config
	addr   string // ADS host:port on 127.0.0.1
	cancel context.CancelFunc
	done   chan error
}

// StartGatewayPilot starts a GatewayPilot against the cluster cfg points
// to, its requests marked with userAgent; it stops when the test ends.
func StartGatewayPilot(t testing.TB, cfg *rest.Config, userAgent string) *GatewayPilot {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &GatewayPilot{t: t, cfg: rest.CopyConfig(cfg), addr: lis.Addr().String()}
	p.cfg.UserAgent = userAgent
	p.run(lis)
	t.Cleanup(p.Stop)
	return p
}

// Addr is the ADS address, host:port on 127.0.0.1.
func (p *GatewayPilot) Addr() string { return p.addr }

// Features are the feature flags it runs with.
func (p *GatewayPilot) Features() features.Features {
	return GatewayFeatures(p.addr)
}

// GatewayFeatures are the defaults with the inference extension and the
// Gateway deployment controller on, and the Gateways' bootstraps pointing
// at plaintext ADS on adsAddr.
func GatewayFeatures(adsAddr string) features.Features {
	f := features.Defaults()
	f.EnableInferenceExtension = true // ENABLE_GATEWAY_API_INFERENCE_EXTENSION
	f.EnableGatewayDeployment = true  // PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER
	f.GatewayXDSAddress = adsAddr     // PILOT_GATEWAY_XDS_ADDRESS
	f.GatewayXDSPlaintext = true      // PILOT_GATEWAY_XDS_PLAINTEXT
	return f
}

func (p *GatewayPilot) run(lis net.Listener) {
	p.t.Helper()
	client, err := kube.NewFromRESTConfig(p.cfg, kube.WithAppliedFieldsOf(gateway.FieldManagers(p.Features())...))
	if err != nil {
		_ = lis.Close()
		p.t.Fatal(err)
	}
	s, err := bootstrap.NewServer(bootstrap.Args{
		Client: client, Features: p.Features(), IsLeader: func() bool { return true },
		Debounce: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond,
	})
	if err != nil {
		_ = lis.Close()
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan error, 1)
	go func() { p.done <- s.Run(ctx, lis, nil, nil) }()
}

// Stop stops pilot-discovery and waits for it; safe to call twice.
func (p *GatewayPilot) Stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	if err := <-p.done; err != nil {
		p.t.Errorf("pilot-discovery: %v", err)
	}
	p.cancel = nil
}

// Restart stops pilot-discovery and starts a new one (new informers, new
// ADS server) on the same ADS address, as a restarted pod behind its
// Service. Call it from the test goroutine.
func (p *GatewayPilot) Restart() {
	p.t.Helper()
	p.Stop()
	lis, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("pilot-discovery restart: listen again on %s: %v", p.addr, err)
	}
	p.run(lis)
}

// RestartOn is Restart on a listener of the caller's (on Addr, wrapped to
// observe connections); pilot-discovery must be stopped.
func (p *GatewayPilot) RestartOn(lis net.Listener) {
	p.t.Helper()
	p.Stop()
	p.run(lis)
}
