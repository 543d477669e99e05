// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/infermesh/infermesh/pkg/test/certs"
)

// tcpChain is one filter chain of a test tcp_proxy listener: server names,
// an SDS secret to terminate TLS with ("" passes it through), and the TCP
// proxy's cluster or weighted clusters.
type tcpChain struct {
	name        string
	serverNames []string
	sds         string
	cluster     string
	weighted    map[string]uint32
}

// tcpProxyListener is listener "tcp" on port with chains, and the TLS
// inspector when inspector is set.
func tcpProxyListener(t *testing.T, port uint32, inspector bool, chains ...tcpChain) *listenerv3.Listener {
	t.Helper()
	l := &listenerv3.Listener{Name: fmt.Sprintf("0.0.0.0_%d", port), Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
		SocketAddress: &corev3.SocketAddress{Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}
	if inspector {
		a, err := anypb.New(&tlsinspectorv3.TlsInspector{})
		if err != nil {
			t.Fatal(err)
		}
		l.ListenerFilters = []*listenerv3.ListenerFilter{{Name: listenerFilterTLSInspector, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: a}}}
	}
	for _, c := range chains {
		tp := &tcpproxyv3.TcpProxy{StatPrefix: c.name}
		if c.cluster != "" {
			tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: c.cluster}
		} else {
			wc := &tcpproxyv3.TcpProxy_WeightedCluster{}
			for _, n := range slices.Sorted(maps.Keys(c.weighted)) {
				wc.Clusters = append(wc.Clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: n, Weight: c.weighted[n]})
			}
			tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: wc}
		}
		a, err := anypb.New(tp)
		if err != nil {
			t.Fatal(err)
		}
		fc := &listenerv3.FilterChain{Name: c.name, Filters: []*listenerv3.Filter{{Name: networkFilterTCPProxy, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}}}}
		if len(c.serverNames) > 0 {
			fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: c.serverNames}
		}
		if c.sds != "" {
			d, err := anypb.New(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
				TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: c.sds, SdsConfig: &corev3.ConfigSource{
					ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			fc.TransportSocket = &corev3.TransportSocket{Name: transportSocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: d}}
		}
		l.FilterChains = append(l.FilterChains, fc)
	}
	return l
}

// tcpBackend is a TCP server on loopback. On each connection it answers
// "<name> tls=<bool> sni=<server name>\n" (terminating TLS first with a
// certificate for name when tlsOn), then echoes every line it reads,
// prefixed with "echo ", until EOF, then writes "bye\n" and closes: a
// client that half-closes still gets the answer (tcp_proxy passes
// half-closes on).
func tcpBackend(t *testing.T, name string, tlsOn bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var cfg *tls.Config
	if tlsOn {
		crt, key, err := certs.SelfSignedFor(name, nil, []string{"*.example.com", "a.example.com"})
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(crt, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				var conn net.Conn = c
				sni := ""
				if cfg != nil {
					tc := tls.Server(c, cfg)
					if tc.Handshake() != nil {
						return
					}
					sni, conn = tc.ConnectionState().ServerName, tc
				}
				fmt.Fprintf(conn, "%s tls=%t sni=%s\n", name, cfg != nil, sni)
				sc := bufio.NewScanner(conn)
				for sc.Scan() {
					fmt.Fprintf(conn, "echo %s\n", sc.Text())
				}
				fmt.Fprint(conn, "bye\n")
			}()
		}
	}()
	return ln.Addr().String()
}

// dialTCP connects to the data plane's listener on port.
func dialTCP(t *testing.T, dp *DataPlane, port uint32) net.Conn {
	t.Helper()
	a := dp.Addr(port)
	if a == nil {
		t.Fatalf("no listener on %d", port)
	}
	c, err := net.DialTimeout("tcp", a.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// greeting reads the backend's first line, or returns the error (the
// proxy closed the connection).
func greeting(c net.Conn) (string, error) {
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// TestTCPProxyForwardsBothWaysWithHalfClose checks tcp_proxy's data path
// (source/common/tcp_proxy/tcp_proxy.cc, Filter::onData and
// onUpstreamData; half-close enabled on both connections in
// Filter::initialize): bytes go both ways unchanged, and a client's
// half-close (FIN) reaches the upstream while the client can still read
// the upstream's answer.
func TestTCPProxyForwardsBothWaysWithHalfClose(t *testing.T) {
	dp := newTestDP(t, Options{})
	b := tcpBackend(t, "b", false)
	load(t, dp, edsCluster(t, "c", false), cla("c", b), tcpProxyListener(t, 9300, false, tcpChain{name: "tcp", cluster: "c"}))
	c := dialTCP(t, dp, 9300)
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || line != "b tls=false sni=\n" {
		t.Fatalf("greeting %q, %v", line, err)
	}
	fmt.Fprint(c, "one\ntwo\n")
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(rest), "echo one\necho two\nbye\n"; got != want {
		t.Errorf("after the half-close the client read %q, want %q (the upstream saw the FIN and answered)", got, want)
	}
	if n := dp.TCPProxyCounters().Connections; n != 1 {
		t.Errorf("Connections = %d, want 1", n)
	}
}

// TestTCPProxyWeightedClusters checks weighted_clusters
// (Config::getRouteFromEntries, WeightedClusterUtil::pickCluster over the
// sum of the weights): each connection goes to one cluster in proportion
// to its weight; a cluster that does not exist closes the connections
// picked for it (downstream_cx_no_route), so an invalid backend's share is
// refused in proportion too.
func TestTCPProxyWeightedClusters(t *testing.T) {
	dp := newTestDP(t, Options{Rand: rand.New(rand.NewPCG(1, 2))})
	load(t, dp, edsCluster(t, "v1", false), cla("v1", tcpBackend(t, "v1", false)),
		edsCluster(t, "v2", false), cla("v2", tcpBackend(t, "v2", false)),
		tcpProxyListener(t, 9300, false, tcpChain{name: "tcp", weighted: map[string]uint32{"v1": 6, "v2": 3, "missing": 1}}))
	counts := map[string]int{}
	const n = 600
	for range n {
		g, err := greeting(dialTCP(t, dp, 9300))
		if err != nil {
			counts["refused"]++
			continue
		}
		counts[strings.Fields(g)[0]]++
	}
	for name, want := range map[string]float64{"v1": 0.6, "v2": 0.3, "refused": 0.1} {
		if got := float64(counts[name]) / n; got < want-0.06 || got > want+0.06 {
			t.Errorf("%s got %.3f of the connections, want %.2f (counts %v)", name, got, want, counts)
		}
	}
	if got := dp.TCPProxyCounters().NoRoute; got != int64(counts["refused"]) {
		t.Errorf("NoRoute = %d, want %d", got, counts["refused"])
	}
}

// TestTCPProxyClosesWithoutUpstream checks the failures that close the
// downstream connection (Filter::initializeUpstreamConnection,
// onInitFailure): no such cluster (downstream_cx_no_route), a cluster with
// no endpoint (upstream_cx_none_healthy), an endpoint that refuses the
// connection (max_connect_attempts 1: upstream_cx_connect_attempts_exceeded).
func TestTCPProxyClosesWithoutUpstream(t *testing.T) {
	dp := newTestDP(t, Options{})
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	load(t, dp, edsCluster(t, "empty", false), cla("empty"), edsCluster(t, "dead", false), cla("dead", deadAddr),
		tcpProxyListener(t, 9301, false, tcpChain{name: "a", cluster: "missing"}),
		tcpProxyListener(t, 9302, false, tcpChain{name: "b", cluster: "empty"}),
		tcpProxyListener(t, 9303, false, tcpChain{name: "c", cluster: "dead"}))
	for _, port := range []uint32{9301, 9302, 9303} {
		if g, err := greeting(dialTCP(t, dp, port)); err == nil {
			t.Errorf("port %d: got %q, want the connection closed", port, g)
		}
	}
	got := dp.TCPProxyCounters()
	if got.NoRoute != 1 || got.NoHealthyUpstream != 1 || got.ConnectFailed != 1 {
		t.Errorf("counters %+v, want one each of NoRoute, NoHealthyUpstream, ConnectFailed", got)
	}
}

// TestTLSPassthroughSelectsChainBySNI checks TLS passthrough: the TLS
// inspector (tls_inspector.cc) reads the ClientHello's server name without
// consuming it, the filter chain is chosen by it as on any TLS listener
// (filter_chain_manager_impl.cc findFilterChainForServerName: exact, then
// the longest wildcard), and a chain without a transport socket hands the
// untouched bytes to tcp_proxy: the client's TLS session is with the
// upstream, which sees the SNI. No chain for the name: the connection is
// closed (no_filter_chain_match).
func TestTLSPassthroughSelectsChainBySNI(t *testing.T) {
	dp := newTestDP(t, Options{})
	load(t, dp, edsCluster(t, "exact", false), cla("exact", tcpBackend(t, "exact", true)),
		edsCluster(t, "wild", false), cla("wild", tcpBackend(t, "wild", true)),
		tcpProxyListener(t, 443, true,
			tcpChain{name: "exact", serverNames: []string{"a.example.com"}, cluster: "exact"},
			tcpChain{name: "wild", serverNames: []string{"*.example.com"}, cluster: "wild"}))
	for _, tc := range []struct{ sni, backend string }{
		{"a.example.com", "exact"},
		{"b.example.com", "wild"},
		{"x.y.example.com", "wild"},
	} {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", dp.Addr(443).String(),
			&tls.Config{ServerName: tc.sni, InsecureSkipVerify: true}) //nolint:gosec // the test reads the certificate served
		if err != nil {
			t.Fatalf("SNI %s: %v", tc.sni, err)
		}
		if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != tc.backend {
			t.Errorf("SNI %s: the TLS session is with %q, want the upstream %q (passthrough)", tc.sni, cn, tc.backend)
		}
		g, err := greeting(c)
		if want := tc.backend + " tls=true sni=" + tc.sni; err != nil || g != want {
			t.Errorf("SNI %s: upstream said %q (%v), want %q", tc.sni, g, err, want)
		}
		_ = c.Close()
	}
	for _, sni := range []string{"example.com", "other.org", ""} {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", dp.Addr(443).String(),
			&tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // only the refusal matters
		if err == nil {
			_ = c.Close()
			t.Errorf("SNI %q: a TLS session was established, want the connection closed", sni)
		}
	}
	if n := dp.Counters().NoFilterChainMatch; n != 3 {
		t.Errorf("NoFilterChainMatch = %d, want 3", n)
	}
}

// TestTLSInspectorPassesNonTLSBytes: bytes that are not a ClientHello end
// the inspection without a server name (tls_inspector.cc getParserState:
// tls_not_found, the filter chain search goes on), so only a chain without
// server_names takes the connection, and it gets every byte read by the
// inspector.
func TestTLSInspectorPassesNonTLSBytes(t *testing.T) {
	dp := newTestDP(t, Options{})
	load(t, dp, edsCluster(t, "plain", false), cla("plain", tcpBackend(t, "plain", false)),
		edsCluster(t, "named", false), cla("named", tcpBackend(t, "named", true)),
		tcpProxyListener(t, 9443, true,
			tcpChain{name: "named", serverNames: []string{"a.example.com"}, cluster: "named"},
			tcpChain{name: "any", cluster: "plain"}))
	c := dialTCP(t, dp, 9443)
	// The backend speaks first, but the inspector waits for the client's
	// bytes; they are "GET / HTTP/1.0\r\n\r\n"-like, not TLS.
	fmt.Fprint(c, "hello there\n")
	r := bufio.NewReader(c)
	for _, want := range []string{"plain tls=false sni=\n", "echo hello there\n"} {
		if line, err := r.ReadString('\n'); err != nil || line != want {
			t.Fatalf("read %q (%v), want %q", line, err, want)
		}
	}
}

// TestTLSInspectorClientHelloTooLarge: a ClientHello that does not end
// within max_client_hello_size (64 KiB, TLS_MAX_CLIENT_HELLO) closes the
// connection (tls_inspector.cc getParserState: client_hello_too_large).
func TestTLSInspectorClientHelloTooLarge(t *testing.T) {
	dp := newTestDP(t, Options{})
	load(t, dp, edsCluster(t, "any", false), cla("any", tcpBackend(t, "any", false)),
		tcpProxyListener(t, 9443, true, tcpChain{name: "any", cluster: "any"}))
	c := dialTCP(t, dp, 9443)
	// One handshake message (ClientHello, type 1) declaring 65,535 bytes,
	// sent in records of 16,384 bytes: more than 64 KiB read before it ends.
	msg := make([]byte, 4+65535)
	msg[0] = 1
	msg[1], msg[2], msg[3] = 0x00, 0xff, 0xff
	var wire []byte
	for len(msg) > 0 {
		n := min(len(msg), 16384)
		hdr := []byte{22, 3, 1, 0, 0}
		binary.BigEndian.PutUint16(hdr[3:], uint16(n))
		wire = append(append(wire, hdr...), msg[:n]...)
		msg = msg[n:]
	}
	go func() { _, _ = c.Write(wire) }()
	if _, err := io.ReadAll(c); err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read: %v", err)
	}
	if got := dp.TCPProxyCounters(); got.ClientHelloTooLarge != 1 || got.Connections != 0 {
		t.Errorf("counters %+v, want ClientHelloTooLarge 1 and no proxied connection", got)
	}
}

// TestTLSTerminatedInFrontOfTCPProxy checks a chain that terminates TLS
// (DownstreamTlsContext with its SDS certificate, as tls.go) and hands the
// plaintext to tcp_proxy: the client's session is with the listener's
// certificate, the upstream reads plain bytes and no SNI.
func TestTLSTerminatedInFrontOfTCPProxy(t *testing.T) {
	dp := newTestDP(t, Options{})
	secret := sdsSecret(t, "terminate")
	secret.Name = "kubernetes-gateway://ns/terminate"
	load(t, dp, edsCluster(t, "plain", false), cla("plain", tcpBackend(t, "plain", false)),
		edsCluster(t, "pass", false), cla("pass", tcpBackend(t, "pass", true)),
		tcpProxyListener(t, 8443, true,
			tcpChain{name: "terminate", serverNames: []string{"tls.example.com"}, sds: secret.Name, cluster: "plain"},
			tcpChain{name: "passthrough", serverNames: []string{"abc.example.com"}, cluster: "pass"}))
	if dp.Addr(8443) != nil {
		t.Fatal("the listener serves before its SDS secret arrived")
	}
	load(t, dp, secret)
	for _, tc := range []struct{ sni, cn, greeting string }{
		{"tls.example.com", "terminate", "plain tls=false sni="},
		{"abc.example.com", "pass", "pass tls=true sni=abc.example.com"},
	} {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", dp.Addr(8443).String(),
			&tls.Config{ServerName: tc.sni, InsecureSkipVerify: true}) //nolint:gosec // the test reads the certificate served
		if err != nil {
			t.Fatalf("SNI %s: %v", tc.sni, err)
		}
		if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != tc.cn {
			t.Errorf("SNI %s: certificate %q, want %q", tc.sni, cn, tc.cn)
		}
		if g, err := greeting(c); err != nil || g != tc.greeting {
			t.Errorf("SNI %s: upstream said %q (%v), want %q", tc.sni, g, err, tc.greeting)
		}
		_ = c.Close()
	}
}

// TestTCPProxyListenerRefusals: what Envoy refuses (a listener without
// filter chains, ListenerImpl; two chains with the same match,
// FilterChainManagerImpl; a weight of 0, the proto's rule) and what the
// stand-in does not implement (server_names without the TLS inspector,
// which never match in Envoy; tcp_proxy beside the HTTP connection manager;
// any TcpProxy field but the cluster ones) are NACKed.
func TestTCPProxyListenerRefusals(t *testing.T) {
	dp := newTestDP(t, Options{})
	edit := func(l *listenerv3.Listener, f func(*tcpproxyv3.TcpProxy)) *listenerv3.Listener {
		l = proto.Clone(l).(*listenerv3.Listener)
		var tp tcpproxyv3.TcpProxy
		if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&tp); err != nil {
			t.Fatal(err)
		}
		f(&tp)
		a, err := anypb.New(&tp)
		if err != nil {
			t.Fatal(err)
		}
		l.FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
		return l
	}
	base := tcpProxyListener(t, 9300, false, tcpChain{name: "a", cluster: "c"})
	noFilters := tcpProxyListener(t, 9300, true, tcpChain{name: "a", cluster: "c"}, tcpChain{name: "b", serverNames: []string{"x"}, cluster: "c"})
	noFilters.FilterChains[1].Filters = nil
	mixed := tcpProxyListener(t, 9300, true, tcpChain{name: "a", cluster: "c"})
	mixed.FilterChains = append(mixed.FilterChains, proto.Clone(seedListener(t).FilterChains[0]).(*listenerv3.FilterChain))
	mixed.FilterChains[1].FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: []string{"x"}}
	for name, tc := range map[string]struct {
		l    *listenerv3.Listener
		want string
	}{
		"duplicate match": {tcpProxyListener(t, 9300, true, tcpChain{name: "a", serverNames: []string{"a.example.com"}, cluster: "c"},
			tcpChain{name: "b", serverNames: []string{"a.example.com"}, cluster: "c"}), "multiple filter chains with the same matching rules"},
		"no inspector":   {tcpProxyListener(t, 9300, false, tcpChain{name: "a", serverNames: []string{"a.example.com"}, cluster: "c"}), "never match"},
		"weight 0":       {tcpProxyListener(t, 9300, false, tcpChain{name: "a", weighted: map[string]uint32{"c": 0}}), "Weight"},
		"idle_timeout":   {edit(base, func(tp *tcpproxyv3.TcpProxy) { tp.IdleTimeout = durationpb.New(time.Second) }), "unimplemented field envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.idle_timeout"},
		"no stat_prefix": {edit(base, func(tp *tcpproxyv3.TcpProxy) { tp.StatPrefix = "" }), "StatPrefix"},
		"beside the HCM": {mixed, "exactly that one network filter"},
		"empty chain":    {noFilters, "exactly that one network filter"},
	} {
		a, err := anypb.New(tc.l)
		if err != nil {
			t.Fatal(err)
		}
		_, err = dp.decode("type.googleapis.com/envoy.config.listener.v3.Listener", a)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
	none := &listenerv3.Listener{Name: "0.0.0.0_9300", Address: base.Address}
	if _, err := compileTCPProxyListener(none); err == nil || !strings.Contains(err.Error(), "no filter chains specified") {
		t.Errorf("no filter chains: %v", err)
	}
}
