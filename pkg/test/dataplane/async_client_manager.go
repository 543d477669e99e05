// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// dialGRPC is the extproc.Dialer: a gRPC connection to one endpoint of an
// HTTP/2 cluster (round robin), with the cluster's TLS, cached per cluster
// version, endpoint and authority.
func (dp *DataPlane) dialGRPC(ctx context.Context, cluster, authority string) (grpc.ClientConnInterface, error) {
	c := dp.active.Load().clusters[cluster]
	if c == nil {
		return nil, fmt.Errorf("ext_proc: cluster %q: %w", cluster, errNoCluster)
	}
	if !c.rt.cfg.http2 {
		return nil, fmt.Errorf("ext_proc: cluster %q is not HTTP/2", cluster)
	}
	if len(c.addrs) == 0 {
		return nil, fmt.Errorf("ext_proc: cluster %q: %s", cluster, bodyNoHealthyUpstream)
	}
	if authority == "" {
		authority = cluster
	}
	addr := c.rt.roundRobin(c.addrs)
	key := fmt.Sprintf("%p|%s|%s", c.rt, addr, authority)
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return nil, errors.New("ext_proc: data plane stopped")
	}
	if cc := dp.grpcConns[key]; cc != nil {
		return cc, nil
	}
	creds := insecure.NewCredentials()
	if c.rt.cfg.tls != nil {
		creds = credentials.NewTLS(c.rt.cfg.tls.Clone())
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	// grpc-go refuses an authority that differs from the TLS ServerName;
	// with SNI set, the authority is the SNI (Envoy sends the cluster name
	// as :authority and the SNI separately: see architecture/dataplane.md).
	if c.rt.cfg.tls == nil || c.rt.cfg.tls.ServerName == "" {
		opts = append(opts, grpc.WithAuthority(authority))
	}
	timeout := c.rt.cfg.connectTimeout
	opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if dp.opts.Dial != nil {
			return dp.opts.Dial(ctx, "tcp", a)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", a)
	}))
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, err
	}
	dp.grpcConns[key] = cc
	return cc, nil
}
