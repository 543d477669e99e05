// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"context"
	"net"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/infermesh/infermesh/pilot/pkg/bootstrap"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/kube"
)

// pilotUserAgent marks pilot-discovery's requests in the audit log.
const pilotUserAgent = "pilot-discovery-gie-integ"

// pilot is the whole pilot-discovery (bootstrap.Server) in process: always
// leader, the inference extension on, the Gateway deployment controller on
// with plaintext ADS on its own loopback address, which the bootstrap
// ConfigMaps therefore name. Restart keeps that address.
type pilot struct {
	t      *testing.T
	cfg    *rest.Config
	addr   string // ADS host:port on 127.0.0.1
	cancel context.CancelFunc
	done   chan error
}

// startPilot starts pilot-discovery against the cluster cfg points to; it
// stops when the test ends.
func startPilot(t *testing.T, cfg *rest.Config) *pilot {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pilot{t: t, cfg: rest.CopyConfig(cfg), addr: lis.Addr().String()}
	p.cfg.UserAgent = pilotUserAgent
	p.run(lis)
	t.Cleanup(p.Stop)
	return p
}

func (p *pilot) features() features.Features {
	f := features.Defaults()
	f.EnableInferenceExtension = true // ENABLE_GATEWAY_API_INFERENCE_EXTENSION
	f.EnableGatewayDeployment = true  // PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER
	f.GatewayXDSAddress = p.addr      // PILOT_GATEWAY_XDS_ADDRESS
	f.GatewayXDSPlaintext = true      // PILOT_GATEWAY_XDS_PLAINTEXT
	return f
}

func (p *pilot) run(lis net.Listener) {
	p.t.Helper()
	client, err := kube.NewFromRESTConfig(p.cfg)
	if err != nil {
		_ = lis.Close()
		p.t.Fatal(err)
	}
	s, err := bootstrap.NewServer(bootstrap.Args{
		Client: client, Features: p.features(), IsLeader: func() bool { return true },
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
func (p *pilot) Stop() {
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
func (p *pilot) Restart() {
	p.t.Helper()
	p.Stop()
	lis, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("pilot-discovery restart: listen again on %s: %v", p.addr, err)
	}
	p.run(lis)
}
