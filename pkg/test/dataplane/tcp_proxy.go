// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
)

// Listeners whose filter chains end in the TCP proxy network filter
// (envoy.filters.network.tcp_proxy), as Envoy serves them: TCP listeners
// (one chain, no listener filter), and TLS listeners that pass TLS through
// (chains matched on the TLS inspector's server name, no transport socket)
// or terminate it in front of the proxy (a chain with a
// DownstreamTlsContext, compiled as tls.go compiles an HTTPS chain's).
//
// Each connection, after Envoy's (source/common/tcp_proxy/tcp_proxy.cc,
// Config::Config, Config::getRouteFromEntries, Filter::onNewConnection and
// Filter::initializeUpstreamConnection; the listener's connection handling
// in source/common/listener_manager/active_tcp_listener.cc and
// filter_chain_manager_impl.cc):
//
//  1. the TLS inspector, when the listener has it, reads the ClientHello's
//     server name (tls_inspector.go);
//  2. the filter chain is chosen by that name as for an HTTPS listener
//     (selectChain: exact, longest wildcard, then the chain without
//     server_names); none: the connection is closed and counted
//     (no_filter_chain_match);
//  3. the TCP proxy picks its cluster: cluster, or one of weighted_clusters
//     at random in proportion to its weight (WeightedClusterUtil::pickCluster
//     over the sum of the weights; each weight is at least 1, the proto's
//     rule). A cluster that does not exist closes the connection
//     (downstream_cx_no_route), and so does one without a healthy endpoint
//     (upstream_cx_none_healthy): a backend share the control plane left
//     invalid is a rejected connection, in proportion to its weight;
//  4. it connects to an endpoint of the cluster chosen by the cluster's load
//     balancer (round robin), within the cluster's connect_timeout, with the
//     cluster's upstream TLS if it has any; max_connect_attempts defaults to
//     1, so a failed connect closes the downstream connection
//     (upstream_cx_connect_attempts_exceeded). The downstream connection is
//     not read until then (readDisable), so a terminating chain's TLS
//     handshake starts only once the upstream is connected;
//  5. bytes are copied both ways; a half-close (FIN) of either side is passed
//     on to the other (the proxy enables half-close on both connections),
//     and the connection ends once both directions are closed;
//  6. idle_timeout (default 1 hour) closes both sides when no byte has moved
//     either way for that long.
//
// A connection keeps the chain and cluster it was given; a listener update
// applies to new connections, as Envoy drains the old listener's.
//
// Where the stand-in differs (architecture/dataplane.md): circuit breakers
// are not enforced on TCP connections; the weighted pick uses Options.Rand;
// upstream hosts are picked by round robin whatever the cluster's policy
// (override_host has no metadata to act on for a TCP connection and falls
// back to round robin in Envoy too).

const networkFilterTCPProxy = "envoy.filters.network.tcp_proxy"

// tcpProxyIdleTimeout is TcpProxy.idle_timeout's default.
const tcpProxyIdleTimeout = time.Hour

// streamListener is a compiled listener whose filter chains end in
// tcp_proxy.
type streamListener struct {
	// inspector is set when the listener has the TLS inspector.
	inspector bool
	// chains match on server_names as HTTPS chains do (selectChain); a
	// chain with sdsName set terminates TLS with that certificate, one
	// without passes the bytes through as they came.
	chains []*tlsChain
	// proxies are each chain's TCP proxy.
	proxies map[*tlsChain]*tcpProxyConfig
}

// tcpProxyConfig is a compiled TcpProxy.
type tcpProxyConfig struct {
	cluster  string
	weighted []tcpWeightedCluster
	total    uint64
}

type tcpWeightedCluster struct {
	name   string
	weight uint32
}

// sdsNames are the secrets the terminating chains fetch.
func (s *streamListener) sdsNames() []string {
	var out []string
	for _, c := range s.chains {
		if c.sdsName != "" {
			out = append(out, c.sdsName)
		}
	}
	return out
}

// usesTCPProxy reports whether any filter chain of l has a tcp_proxy
// network filter.
func usesTCPProxy(l *listenerv3.Listener) bool {
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			if f.GetName() == networkFilterTCPProxy {
				return true
			}
		}
	}
	return false
}

// compileTCPProxyListener compiles a listener whose every filter chain has
// exactly one network filter, tcp_proxy (a listener mixing it with the
// HTTP connection manager is not implemented).
func compileTCPProxyListener(l *listenerv3.Listener) (*listenerConfig, error) {
	lc, err := listenerAddress(l)
	if err != nil {
		return nil, err
	}
	s := &streamListener{proxies: map[*tlsChain]*tcpProxyConfig{}}
	for i, lf := range l.GetListenerFilters() {
		msg, err := lf.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("listener_filters[%d] %s: %w", i, lf.GetName(), err)
		}
		if _, ok := msg.(*tlsinspectorv3.TlsInspector); !ok || lf.GetName() != listenerFilterTLSInspector {
			return nil, fmt.Errorf("listener_filters[%d] %s (%T) not implemented", i, lf.GetName(), msg)
		}
		s.inspector = true
	}
	if len(l.GetFilterChains()) == 0 {
		// ListenerImpl (source/common/listener_manager/listener_impl.cc):
		// a TCP listener must have a filter chain.
		return nil, &InvalidConfigError{Source: "source/common/listener_manager/listener_impl.cc",
			Reason: fmt.Sprintf("error adding listener '%s:%d': no filter chains specified", lc.address, lc.port)}
	}
	seen := map[string]string{}
	for i, fc := range l.GetFilterChains() {
		c := &tlsChain{name: fc.GetName(), serverNames: fc.GetFilterChainMatch().GetServerNames()}
		if len(c.serverNames) > 0 && !s.inspector {
			return nil, fmt.Errorf("filter_chains[%d] %s: server_names without the %s listener filter never match", i, c.name, listenerFilterTLSInspector)
		}
		if fc.GetTransportSocket() != nil {
			if err := c.compileTLS(fc.GetTransportSocket().GetName(), fc); err != nil {
				return nil, fmt.Errorf("filter_chains[%d] %s: %w", i, c.name, err)
			}
		}
		keys := c.serverNames
		if len(keys) == 0 {
			keys = []string{""}
		}
		for _, sn := range keys {
			if prev, dup := seen[sn]; dup {
				return nil, &InvalidConfigError{Source: "source/common/listener_manager/filter_chain_manager_impl.cc",
					Reason: fmt.Sprintf("multiple filter chains with the same matching rules are defined: %s and %s (server name %q)", prev, c.name, sn)}
			}
			seen[sn] = c.name
		}
		if len(fc.GetFilters()) != 1 || fc.GetFilters()[0].GetName() != networkFilterTCPProxy {
			return nil, fmt.Errorf("filter_chains[%d] %s: a listener with %s takes exactly that one network filter in every chain", i, c.name, networkFilterTCPProxy)
		}
		p, err := compileTCPProxy(fc.GetFilters()[0])
		if err != nil {
			return nil, fmt.Errorf("filter_chains[%d] %s: %w", i, c.name, err)
		}
		s.chains = append(s.chains, c)
		s.proxies[c] = p
	}
	lc.stream = s
	return lc, nil
}

// compileTCPProxy compiles the TcpProxy filter's config: cluster or
// weighted_clusters (proto validation has required stat_prefix, one of the
// two, at least one weighted cluster and every weight at least 1).
func compileTCPProxy(f *listenerv3.Filter) (*tcpProxyConfig, error) {
	var tp tcpproxyv3.TcpProxy
	if err := f.GetTypedConfig().UnmarshalTo(&tp); err != nil {
		return nil, fmt.Errorf("%s: %w", networkFilterTCPProxy, err)
	}
	// Envoy validates a filter's typed_config against its proto rules
	// when it creates the filter factory (MessageUtil::downcastAndValidate).
	if err := tp.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", networkFilterTCPProxy, err)
	}
	p := &tcpProxyConfig{cluster: tp.GetCluster()}
	for _, cw := range tp.GetWeightedClusters().GetClusters() {
		p.weighted = append(p.weighted, tcpWeightedCluster{name: cw.GetName(), weight: cw.GetWeight()})
		p.total += uint64(cw.GetWeight())
	}
	if p.cluster == "" && p.total == 0 {
		return nil, fmt.Errorf("%s: no cluster", networkFilterTCPProxy)
	}
	return p, nil
}

// pick is the cluster for a new connection.
func (p *tcpProxyConfig) pick(dp *DataPlane) string {
	if len(p.weighted) == 0 {
		return p.cluster
	}
	n := dp.randUnder(p.total)
	for _, w := range p.weighted {
		if n < uint64(w.weight) {
			return w.name
		}
		n -= uint64(w.weight)
	}
	return p.weighted[len(p.weighted)-1].name
}

// TCPProxyCounters are the TCP proxy's statistics (Envoy's tcp.<prefix>
// and cluster stats of those names, summed over listeners and clusters).
type TCPProxyCounters struct {
	// Connections counts downstream connections given to a TCP proxy
	// (downstream_cx_total).
	Connections int64
	// NoRoute counts connections closed because their cluster does not
	// exist (downstream_cx_no_route).
	NoRoute int64
	// NoHealthyUpstream counts connections closed because their cluster
	// has no endpoint (upstream_cx_none_healthy).
	NoHealthyUpstream int64
	// ConnectFailed counts connections closed because the upstream could
	// not be connected (upstream_cx_connect_attempts_exceeded).
	ConnectFailed int64
	// ClientHelloTooLarge counts connections the TLS inspector closed
	// (tls_inspector.client_hello_too_large).
	ClientHelloTooLarge int64
}

type tcpProxyCounters struct {
	connections, noRoute, noHealthy, connectFailed, helloTooLarge atomic.Int64
}

// TCPProxyCounters returns the TCP proxy's counters.
func (dp *DataPlane) TCPProxyCounters() TCPProxyCounters {
	c := &dp.tcpProxy
	return TCPProxyCounters{Connections: c.connections.Load(), NoRoute: c.noRoute.Load(),
		NoHealthyUpstream: c.noHealthy.Load(), ConnectFailed: c.connectFailed.Load(), ClientHelloTooLarge: c.helloTooLarge.Load()}
}

// streamServer accepts the connections of one tcp_proxy listener.
type streamServer struct {
	dp   *DataPlane
	name string
	ln   net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// serveStream serves the tcp_proxy listener called name on ln.
func serveStream(dp *DataPlane, name string, port uint32, ln net.Listener) *boundListener {
	s := &streamServer{dp: dp, name: name, ln: ln, conns: map[net.Conn]struct{}{}}
	b := &boundListener{name: name, port: port, ln: ln, stream: s, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				s.wg.Wait()
				return
			}
			if !s.track(c) {
				_ = c.Close()
				continue
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer s.untrack(c)
				s.handle(c)
			}()
		}
	}()
	return b
}

func (s *streamServer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *streamServer) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.Close()
}

// Close stops accepting and closes every connection, as the HTTP
// listeners' servers do when their listener goes.
func (s *streamServer) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	return s.ln.Close()
}

// handle serves one downstream connection to its end.
func (s *streamServer) handle(c net.Conn) {
	dp := s.dp
	ac := dp.active.Load()
	lc := ac.listeners[s.name]
	if lc == nil || lc.stream == nil {
		return
	}
	sl := lc.stream
	var down net.Conn = c
	var hello clientHello
	if sl.inspector {
		h, replay, err := inspectClientHello(c, listenerFiltersTimeout)
		if err != nil {
			if errors.Is(err, errClientHelloTooLarge) {
				dp.tcpProxy.helloTooLarge.Add(1)
			}
			dp.log.Debug("dataplane: tls_inspector closed the connection", "listener", s.name, "error", err)
			return
		}
		hello, down = h, &replayConn{Conn: c, pending: replay}
	}
	chain := selectChain(sl.chains, hello.serverName)
	if chain == nil {
		dp.counters.noFilterChainMatch.Add(1)
		dp.log.Debug("dataplane: no matching filter chain found; closing the connection", "listener", s.name, "sni", hello.serverName)
		return
	}
	dp.tcpProxy.connections.Add(1)
	up, err := dp.tcpProxyConnect(ac, sl.proxies[chain].pick(dp))
	if err != nil {
		dp.log.Debug("dataplane: tcp_proxy closed the connection", "listener", s.name, "chain", chain.name, "error", err)
		return
	}
	defer up.Close()
	if chain.sdsName != "" {
		cert := ac.secrets[chain.sdsName]
		if cert == nil {
			return // cannot happen: a listener is active only with its secrets
		}
		ts := tls.Server(down, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert},
			NextProtos: chain.alpn, ClientAuth: chain.clientAuth, ClientCAs: chain.clientCAs})
		if err := ts.Handshake(); err != nil {
			dp.log.Debug("dataplane: TLS handshake failed", "listener", s.name, "chain", chain.name, "error", err)
			return
		}
		down = ts
	}
	proxyBytes(down, up, tcpProxyIdleTimeout)
}

// errNoHealthyUpstream is a cluster without endpoints.
var errNoHealthyUpstream = errors.New("no healthy upstream")

// tcpProxyConnect connects to an endpoint of cluster (see the steps above).
func (dp *DataPlane) tcpProxyConnect(ac *activeConfig, cluster string) (net.Conn, error) {
	c := ac.clusters[cluster]
	if c == nil {
		dp.tcpProxy.noRoute.Add(1)
		return nil, fmt.Errorf("cluster %q: %w", cluster, errNoCluster)
	}
	host, ok := newHostPicker(dp, c, nil).pick()
	if !ok {
		dp.tcpProxy.noHealthy.Add(1)
		return nil, fmt.Errorf("cluster %q: %w", cluster, errNoHealthyUpstream)
	}
	cfg := c.rt.cfg
	ctx, cancel := context.WithTimeout(context.Background(), cfg.connectTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	if dp.opts.Dial != nil {
		conn, err = dp.opts.Dial(ctx, "tcp", host)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", host)
	}
	if err != nil {
		dp.tcpProxy.connectFailed.Add(1)
		return nil, fmt.Errorf("cluster %q host %s: %w", cluster, host, err)
	}
	if cfg.tls == nil {
		return conn, nil
	}
	tc := tls.Client(conn, cfg.tls.Clone())
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		dp.tcpProxy.connectFailed.Add(1)
		return nil, fmt.Errorf("cluster %q host %s: TLS: %w", cluster, host, err)
	}
	return tc, nil
}

// proxyBytes copies a to b and b to a until both directions are closed,
// passing each half-close on; idle closes both when nothing has moved for
// that long.
func proxyBytes(a, b net.Conn, idle time.Duration) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	var timer *time.Timer
	var check func()
	check = func() {
		select {
		case <-done:
			return
		default:
		}
		since := time.Since(time.Unix(0, last.Load()))
		if since >= idle {
			_ = a.Close()
			_ = b.Close()
			return
		}
		timer.Reset(idle - since)
	}
	timer = time.AfterFunc(idle, check)
	defer timer.Stop()
	var wg sync.WaitGroup
	copyHalf := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32*1024)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				last.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					_ = src.Close()
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					closeWrite(dst)
				} else {
					_ = dst.Close()
				}
				return
			}
		}
	}
	wg.Add(2)
	go copyHalf(b, a)
	go copyHalf(a, b)
	wg.Wait()
	close(done)
}

// closeWrite half-closes c (a TCP FIN, or TLS close_notify), or closes it
// when it cannot be half-closed.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	_ = c.Close()
}
