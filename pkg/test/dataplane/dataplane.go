// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// Options configure a DataPlane.
type Options struct {
	// ListenerAddress maps an xDS listener's port to the local address to
	// bind, e.g. 80 -> "127.0.0.1:0". nil binds "127.0.0.1:<port>", unless
	// BindListenerAddresses is set.
	ListenerAddress func(port uint32) string
	// BindListenerAddresses binds each listener at the address and port of
	// its socket_address, as Envoy does (the command in cmd/dataplane, run as
	// a pod's process in its own network namespace). It excludes
	// ListenerAddress. Only with it does Run serve the bootstrap's admin
	// and static listeners (server.go): their ports are fixed, and the
	// static clusters name them.
	BindListenerAddresses bool
	// ServiceNode, when not empty, replaces the bootstrap node's id, as
	// Envoy's --service-node does (source/common/local_info/
	// local_info_impl.h, buildLocalNode).
	ServiceNode string
	// Logger receives connection and configuration events; nil discards.
	Logger *slog.Logger
	// Dial, when set, opens every outgoing TCP connection (ADS, upstreams,
	// ext_proc): tests use it to map endpoint addresses such as
	// 10.244.0.13:8000 to loopback servers. nil dials addr as given.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Rand drives weighted cluster selection; nil uses a random seed.
	Rand *rand.Rand
	// MaxBackoff bounds the delay between ADS reconnects (default 2 s; the
	// first retry waits 50 ms, doubling).
	MaxBackoff time.Duration
	// EnvoyVersion is the Envoy release the data plane behaves as,
	// MAJOR.MINOR.PATCH (default DefaultEnvoyVersion). It is declared in
	// the node's user_agent_build_version (unless the bootstrap sets one,
	// as with Envoy), and a field introduced after it (fieldsIntroduced) is
	// ignored as an older Envoy ignores an unknown field: logged once per
	// description at WARN ("Unknown field: ...") and counted in
	// Counters.UnknownFields.
	EnvoyVersion string
}

// DataPlane is an Envoy stand-in for tests, configured only over ADS.
type DataPlane struct {
	opts    Options
	log     *slog.Logger
	target  *adsTarget
	version envoyVersion

	// tunnels are the connections of upgraded streams (WebSocket), which
	// the HTTP server no longer tracks once taken over: shutdown closes
	// them, as Envoy's drain ends every stream.
	tunnelMu sync.Mutex
	tunnels  map[io.Closer]struct{}

	mu               sync.Mutex
	store            *store
	versions         map[string]string // type URL -> last accepted version
	resourceVersions map[string]string // type URL/name -> delta version
	connected        bool
	lastNACK         *NACK
	active           atomic.Pointer[activeConfig]
	changed          chan struct{} // closed and replaced on every change
	clusters         map[string]*clusterRuntime
	warm             map[string]*clusterWarm   // by cluster name (warming.go)
	listeners        map[string]*boundListener // by listener name
	grpcConns        map[string]*grpc.ClientConn
	closed           bool

	randMu sync.Mutex
	rand   *rand.Rand

	counters counters
	extProc  extproc.Counters
	tcpProxy tcpProxyCounters

	unknownMu   sync.Mutex
	unknownSeen map[string]bool // unknown-field descriptions already reported

	// initState is the server's initialization state (init.go), guarded
	// by mu; serverState mirrors it for readers without the lock.
	initState   ServerState
	serverState atomic.Int32
	// staticClusters are the bootstrap's clusters, in every active
	// configuration beside CDS's (static.go).
	staticClusters map[string]*activeCluster
	// server is the admin and the static listeners (server.go), guarded
	// by mu; nil unless Options.BindListenerAddresses.
	server *staticServer
}

// Counters are the data plane's statistics.
type Counters struct {
	// Requests counts downstream requests on xDS listeners.
	Requests int64
	// OverrideHostFallbacks counts upstream picks in an override_host
	// cluster made by its fallback policy (no usable override host).
	OverrideHostFallbacks int64
	// ExtProcFailuresAllowed counts ext_proc failures that
	// failure_mode_allow let through (Envoy's failure_mode_allowed).
	ExtProcFailuresAllowed int64
	// NACKs counts xDS responses rejected; ACKs those accepted.
	NACKs, ACKs int64
	// Retries counts upstream retries.
	Retries int64
	// MaxDurationReached counts requests ended by a route's
	// max_stream_duration (Envoy's downstream_rq_max_duration_reached).
	MaxDurationReached int64
	// UnknownFields counts distinct unknown-field descriptions in xDS
	// resources: fields newer than Options.EnvoyVersion, ignored (Envoy's
	// server.dynamic_unknown_fields).
	UnknownFields int64
	// NoFilterChainMatch counts TLS connections closed because no filter
	// chain matched their server name (Envoy's listener stat
	// no_filter_chain_match).
	NoFilterChainMatch int64
}

type counters struct {
	requests, fallbacks, nacks, acks, retries, maxDurationReached, unknownFields, noFilterChainMatch atomic.Int64
}

// NACK is an xDS response the data plane rejected.
type NACK struct {
	TypeURL, Version, Nonce string
	// Message is the error_detail sent, naming every rejected resource and
	// why (for unimplemented fields, the field's full proto name).
	Message string
}

// Snapshot is the configuration in effect (warmed: a cluster only once it
// has its endpoints, a listener only once it has its routes). Protos are
// shared and must not be modified.
type Snapshot struct {
	Listeners map[string]*listenerv3.Listener
	Routes    map[string]*routev3.RouteConfiguration
	Clusters  map[string]*clusterv3.Cluster
	// Endpoints are each active cluster's routable endpoints, "ip:port".
	Endpoints map[string][]string
	// Secrets are the accepted SDS secrets, by name.
	Secrets map[string]*tlsv3.Secret
	// Versions are the last accepted version_info per type URL.
	Versions map[string]string
	// Connected is true while an ADS stream has answered.
	Connected bool
	// State is the server's initialization state (init.go), as the
	// admin's /ready reports it.
	State    ServerState
	LastNACK *NACK
	Counters Counters
}

// activeConfig is what serves requests; never modified once published.
type activeConfig struct {
	listeners map[string]*listenerConfig
	routes    map[string]*routeTable
	clusters  map[string]*activeCluster
	// secrets are the accepted SDS secrets' certificates: the one a TLS
	// handshake uses is looked up at the handshake (tls.go).
	secrets map[string]*tls.Certificate
	snap    Snapshot
}

type activeCluster struct {
	rt    *clusterRuntime
	addrs []string
}

// New parses the bootstrap (envoy.config.bootstrap.v3.Bootstrap JSON) and
// returns a DataPlane that starts working when Run is called.
func New(bootstrap []byte, opts Options) (*DataPlane, error) {
	t, err := parseBootstrap(bootstrap)
	if err != nil {
		return nil, err
	}
	if opts.BindListenerAddresses && opts.ListenerAddress != nil {
		return nil, errors.New("dataplane: Options.BindListenerAddresses and Options.ListenerAddress exclude each other")
	}
	if opts.ServiceNode != "" {
		t.node = withNodeID(t.node, opts.ServiceNode)
	}
	if opts.EnvoyVersion == "" {
		opts.EnvoyVersion = DefaultEnvoyVersion
	}
	ver, err := parseEnvoyVersion(opts.EnvoyVersion)
	if err != nil {
		return nil, fmt.Errorf("dataplane: Options.EnvoyVersion: %w", err)
	}
	t.node = declaredNode(t.node, ver)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 2 * time.Second
	}
	r := opts.Rand
	if r == nil {
		r = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	dp := &DataPlane{
		opts: opts, log: opts.Logger, target: t, version: ver, store: newStore(), unknownSeen: map[string]bool{},
		versions: map[string]string{}, resourceVersions: map[string]string{},
		changed: make(chan struct{}), clusters: map[string]*clusterRuntime{}, warm: map[string]*clusterWarm{},
		listeners: map[string]*boundListener{}, grpcConns: map[string]*grpc.ClientConn{}, rand: r,
	}
	dp.staticClusters = map[string]*activeCluster{}
	for name, sc := range t.static.clusters {
		dp.staticClusters[name] = &activeCluster{rt: newClusterRuntime(sc.pb, sc.cfg, opts.Dial), addrs: sc.addrs}
	}
	dp.active.Store(&activeConfig{})
	return dp, nil
}

// Run connects to the ADS server and keeps reconnecting (backoff 50 ms
// doubling to Options.MaxBackoff) until ctx is done; the last good
// configuration keeps serving while disconnected. On return every listener
// and connection it opened is closed. It returns nil when ctx ends.
func (dp *DataPlane) Run(ctx context.Context) error {
	defer dp.shutdown()
	if dp.opts.BindListenerAddresses {
		if err := dp.startServer(); err != nil {
			return err
		}
	}
	conn, err := grpc.NewClient(dp.target.address, dp.target.dialOptions(dp.opts.Dial)...)
	if err != nil {
		return fmt.Errorf("dataplane: ADS client: %w", err)
	}
	defer conn.Close()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := dp.adsSession(ctx, conn)
		got := dp.setConnected(false)
		if ctx.Err() != nil {
			break
		}
		dp.log.Info("dataplane: ADS stream ended", "error", err)
		if got {
			backoff = 50 * time.Millisecond
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(backoff*2, dp.opts.MaxBackoff)
	}
	return nil
}

// setConnected records the stream state and returns the previous one.
func (dp *DataPlane) setConnected(c bool) bool {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	prev := dp.connected
	if prev != c {
		dp.connected = c
		dp.publishLocked()
	}
	return prev
}

func (dp *DataPlane) recordNACK(resp *response, msg string) {
	dp.counters.nacks.Add(1)
	dp.log.Warn("dataplane: NACK", "type", resp.typeURL, "version", resp.version, "error", msg)
	dp.mu.Lock()
	defer dp.mu.Unlock()
	dp.lastNACK = &NACK{TypeURL: resp.typeURL, Version: resp.version, Nonce: resp.nonce, Message: msg}
	dp.publishLocked()
}

// unknownField reports a field the data plane's Envoy version does not
// know, as Envoy's WarningValidationVisitorImpl::onUnknownField
// (source/common/protobuf/message_validator_impl.cc): the first time a
// description is seen it is logged at WARN and counted; later ones are not.
func (dp *DataPlane) unknownField(description string) {
	dp.unknownMu.Lock()
	seen := dp.unknownSeen[description]
	dp.unknownSeen[description] = true
	dp.unknownMu.Unlock()
	if seen {
		return
	}
	dp.log.Warn("dataplane: Unknown field: "+description, "envoyVersion", dp.version.String())
	dp.counters.unknownFields.Add(1)
}

// publishLocked computes the active configuration from the store (Envoy's
// warming: a new or changed cluster waits for an assignment sent after it
// was created, or its initial fetch timeout (warming.go); a new or changed
// listener for its route configuration; until then the previous version,
// if any, keeps serving), opens and closes listeners, and wakes WaitFor.
// dp.mu is held.
func (dp *DataPlane) publishLocked() {
	prev := dp.active.Load()
	dp.pruneWarmLocked()
	next := &activeConfig{
		listeners: map[string]*listenerConfig{}, routes: map[string]*routeTable{},
		clusters: map[string]*activeCluster{}, secrets: map[string]*tls.Certificate{},
		snap: Snapshot{
			Listeners: map[string]*listenerv3.Listener{}, Routes: map[string]*routev3.RouteConfiguration{},
			Clusters: map[string]*clusterv3.Cluster{}, Endpoints: map[string][]string{}, Secrets: map[string]*tlsv3.Secret{},
			Versions: map[string]string{}, Connected: dp.connected, LastNACK: dp.lastNACK,
		},
	}
	for k, v := range dp.versions {
		next.snap.Versions[k] = v
	}
	for name, c := range dp.store.clusters {
		if ac := dp.activeClusterLocked(name, c, prev); ac != nil {
			next.clusters[name] = ac
		}
	}
	for name, rt := range dp.clusters {
		if next.clusters[name] == nil {
			rt.close()
			delete(dp.clusters, name)
		}
	}
	for name, e := range dp.store.routes {
		next.routes[name] = e.table
		next.snap.Routes[name] = e.pb
	}
	for name, e := range dp.store.secrets {
		next.secrets[name] = e.cert
		next.snap.Secrets[name] = e.pb
	}
	for name, l := range dp.store.listeners {
		if dp.store.listenerReady(l.cfg) {
			next.listeners[name] = l.cfg
			next.snap.Listeners[name] = l.pb
		} else if old := prev.listeners[name]; old != nil {
			next.listeners[name] = old
			next.snap.Listeners[name] = prev.snap.Listeners[name]
		}
	}
	for name, c := range next.clusters {
		next.snap.Clusters[name] = c.rt.pb
		next.snap.Endpoints[name] = c.addrs
	}
	// Static clusters serve beside CDS's (a CDS cluster of the same name
	// is NACKed, xds.go); the snapshot shows only what came over xDS.
	for name, c := range dp.staticClusters {
		next.clusters[name] = c
	}
	dp.active.Store(next)
	dp.syncListenersLocked(next)
	dp.advanceInitLocked()
	close(dp.changed)
	dp.changed = make(chan struct{})
}

// Snapshot returns the configuration in effect and the counters.
func (dp *DataPlane) Snapshot() Snapshot {
	s := dp.active.Load().snap
	s.Counters = dp.Counters()
	s.State = dp.State()
	return s
}

// Counters returns the current counters.
func (dp *DataPlane) Counters() Counters {
	return Counters{
		Requests:               dp.counters.requests.Load(),
		OverrideHostFallbacks:  dp.counters.fallbacks.Load(),
		ExtProcFailuresAllowed: dp.extProc.FailureModeAllowed.Load(),
		NACKs:                  dp.counters.nacks.Load(),
		ACKs:                   dp.counters.acks.Load(),
		Retries:                dp.counters.retries.Load(),
		MaxDurationReached:     dp.counters.maxDurationReached.Load(),
		UnknownFields:          dp.counters.unknownFields.Load(),
		NoFilterChainMatch:     dp.counters.noFilterChainMatch.Load(),
	}
}

// ExtProcCounters are the ext_proc filter's counters of this data plane.
func (dp *DataPlane) ExtProcCounters() *extproc.Counters { return &dp.extProc }

// WaitFor blocks until pred holds for the current Snapshot (checked now
// and after every configuration or connection change) or ctx is done. The
// counters in the snapshot passed to pred are those at the time of the
// last change; pred must not block.
func (dp *DataPlane) WaitFor(ctx context.Context, pred func(Snapshot) bool) error {
	for {
		dp.mu.Lock()
		ch := dp.changed
		dp.mu.Unlock()
		if pred(dp.Snapshot()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dataplane: WaitFor: %w", ctx.Err())
		case <-ch:
		}
	}
}

// Addr returns the bound address of the active listener on xDS port port,
// or nil if there is none.
func (dp *DataPlane) Addr(port uint32) net.Addr {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	for _, b := range dp.listeners {
		if b.port == port {
			return b.ln.Addr()
		}
	}
	return nil
}

// boundListener is a bound socket serving one xDS listener by name.
type boundListener struct {
	name string
	port uint32
	tls  bool // serves TLS (tls.go)
	ln   net.Listener
	srv  *http.Server
	// stream serves a tcp_proxy listener (tcp_proxy.go) instead of srv.
	stream *streamServer
	done   chan struct{}
}

// syncListenersLocked binds sockets for new active listeners and closes
// those of removed ones (or whose port changed).
func (dp *DataPlane) syncListenersLocked(next *activeConfig) {
	if dp.closed {
		return
	}
	for name, b := range dp.listeners {
		if l := next.listeners[name]; l == nil || l.port != b.port || (l.tlsChains != nil) != b.tls || (l.stream != nil) != (b.stream != nil) {
			b.close()
			delete(dp.listeners, name)
		}
	}
	for name, l := range next.listeners {
		if dp.listeners[name] != nil {
			continue
		}
		addr := dp.bindAddress(l)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			// Envoy would reject the listener; we log, the test sees no Addr.
			dp.log.Error("dataplane: bind listener", "listener", name, "address", addr, "error", err)
			continue
		}
		if l.stream != nil {
			dp.listeners[name] = serveStream(dp, name, l.port, ln)
			continue
		}
		if l.tlsChains != nil {
			dp.listeners[name] = serveTLS(dp, name, l.port, ln)
			dp.listeners[name].tls = true
			continue
		}
		dp.listeners[name] = serveHTTP(name, l.port, ln, &listenerHandler{dp: dp, name: name})
	}
}

// bindAddress is where listener l is bound (see Options.ListenerAddress and
// Options.BindListenerAddresses).
func (dp *DataPlane) bindAddress(l *listenerConfig) string {
	port := strconv.FormatUint(uint64(l.port), 10)
	switch {
	case dp.opts.BindListenerAddresses:
		return net.JoinHostPort(l.address, port)
	case dp.opts.ListenerAddress != nil:
		return dp.opts.ListenerAddress(l.port)
	}
	return "127.0.0.1:" + port
}

func (b *boundListener) close() {
	if b.stream != nil {
		_ = b.stream.Close()
		<-b.done
		return
	}
	_ = b.srv.Close()
	<-b.done
}

func (dp *DataPlane) shutdown() {
	dp.mu.Lock()
	dp.closed = true
	ls := dp.listeners
	dp.listeners = map[string]*boundListener{}
	conns := dp.grpcConns
	dp.grpcConns = map[string]*grpc.ClientConn{}
	for _, rt := range dp.clusters {
		rt.close()
	}
	for _, w := range dp.warm {
		w.stop()
	}
	for _, c := range dp.staticClusters {
		c.rt.close()
	}
	srv := dp.server
	dp.server = nil
	dp.mu.Unlock()
	srv.close()
	for _, b := range ls {
		b.close()
	}
	dp.tunnelMu.Lock()
	for c := range dp.tunnels {
		_ = c.Close()
	}
	dp.tunnels = nil
	dp.tunnelMu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// trackTunnel records the closers of an upgraded stream until untrack;
// false (and the closers closed) when the data plane is shutting down.
func (dp *DataPlane) trackTunnel(cs ...io.Closer) (untrack func(), ok bool) {
	dp.tunnelMu.Lock()
	defer dp.tunnelMu.Unlock()
	dp.mu.Lock()
	closed := dp.closed
	dp.mu.Unlock()
	if closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return func() {}, false
	}
	if dp.tunnels == nil {
		dp.tunnels = map[io.Closer]struct{}{}
	}
	for _, c := range cs {
		dp.tunnels[c] = struct{}{}
	}
	return func() {
		dp.tunnelMu.Lock()
		defer dp.tunnelMu.Unlock()
		for _, c := range cs {
			delete(dp.tunnels, c)
		}
	}, true
}

// pickWeighted chooses a weighted cluster at random by weight.
func (dp *DataPlane) pickWeighted(r *route) *weightedCluster {
	return r.weightedAt(dp.randUnder(r.totalWeight))
}

func (dp *DataPlane) randUnder(n uint64) uint64 {
	dp.randMu.Lock()
	defer dp.randMu.Unlock()
	return dp.rand.Uint64N(n)
}

var errNoCluster = errors.New("cluster not found")
