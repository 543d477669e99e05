// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// clusterRuntime is the connection pool, load balancer state and circuit
// breaker counts of one cluster version.
type clusterRuntime struct {
	pb        *clusterv3.Cluster
	cfg       *clusterConfig
	transport *http.Transport
	rr        atomic.Uint64
	active    atomic.Int64
}

func newClusterRuntime(pb *clusterv3.Cluster, cfg *clusterConfig, dial func(context.Context, string, string) (net.Conn, error)) *clusterRuntime {
	var protos http.Protocols
	switch {
	case cfg.http2 && cfg.tls != nil:
		protos.SetHTTP2(true)
	case cfg.http2:
		protos.SetUnencryptedHTTP2(true) // h2c with prior knowledge, as Envoy
	case cfg.negotiate:
		// auto_config (compileAutoConfig; always over TLS): ALPN offers
		// h2,http/1.1 and the connection speaks HTTP/2 exactly when the
		// server picked h2, as Envoy's mixed connection pool.
		protos.SetHTTP1(true)
		protos.SetHTTP2(true)
	default:
		protos.SetHTTP1(true) // Envoy's default upstream codec, whatever ALPN offers
	}
	d := &net.Dialer{Timeout: cfg.connectTimeout}
	if cfg.tcpKeepalive != nil {
		d.KeepAliveConfig = *cfg.tcpKeepalive
	}
	t := &http.Transport{
		Protocols:          &protos,
		TLSClientConfig:    cfg.tls,
		DisableCompression: true,
		MaxConnsPerHost:    int(cfg.maxConnections),
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dial == nil {
				return d.DialContext(ctx, network, addr)
			}
			ctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
			defer cancel()
			return dial(ctx, network, addr)
		},
	}
	return &clusterRuntime{pb: pb, cfg: cfg, transport: t}
}

func (c *clusterRuntime) close() { c.transport.CloseIdleConnections() }

// roundRobin picks the next of addrs.
func (c *clusterRuntime) roundRobin(addrs []string) string {
	return addrs[(c.rr.Add(1)-1)%uint64(len(addrs))]
}
