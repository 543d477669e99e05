// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package epp

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthService is the service name each EPP's health server (on
// --grpc-health-port, always plaintext) reports SERVING for once its
// InferencePool informer has synced the pool:
//   - lwepp v1.6.2: "inference-extension" (pkg/lwepp/server/runserver.go
//     flips it from NOT_SERVING when the datastore's pool has synced);
//   - epp v1.0.0: "readiness" (cmd/epp/runner/health.go; without leader
//     election every service name answers by the same pool-synced check).
func healthService(k Kind) string {
	if k == LWEPP {
		return "inference-extension"
	}
	return "readiness"
}

// waitReady polls until the ext_proc port accepts a TCP connection and the
// health service answers SERVING, the process exits, or ctx ends.
func (p *Process) waitReady(ctx context.Context) error {
	r := p.run
	healthAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.ports.health))
	conn, err := grpc.NewClient(healthAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("health client: %w", err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	service := healthService(p.cfg.Kind)

	interval := 10 * time.Millisecond
	for {
		ok, why := p.readyOnce(ctx, health, service)
		if ok {
			return nil
		}
		select {
		case <-r.done:
			return fmt.Errorf("exited before it was ready (%v)", r.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready: %s (%w)", why, ctx.Err())
		case <-time.After(interval):
		}
		interval = min(2*interval, 250*time.Millisecond)
	}
}

// readyOnce makes one readiness check and says what was missing.
func (p *Process) readyOnce(ctx context.Context, health healthpb.HealthClient, service string) (bool, string) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", p.Addr())
	if err != nil {
		return false, fmt.Sprintf("ext_proc port: %v", err)
	}
	c.Close()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := health.Check(cctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return false, fmt.Sprintf("health check %q on port %d: %v", service, p.ports.health, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return false, fmt.Sprintf("health check %q on port %d: %v", service, p.ports.health, resp.GetStatus())
	}
	return true, ""
}
