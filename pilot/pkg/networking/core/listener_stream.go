// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// Names of the stream listeners' extensions.
const (
	// NetworkFilterTCPProxy is the TCP proxy network filter.
	NetworkFilterTCPProxy = "envoy.filters.network.tcp_proxy"
	// ListenerFilterTLSInspector reads a ClientHello's server name before a
	// filter chain is chosen.
	ListenerFilterTLSInspector = "envoy.filters.listener.tls_inspector"
)

// streamGroup is the TLS or TCP listeners of one port.
type streamGroup struct {
	port      uint32
	protocol  gwv1.ProtocolType
	listeners []model.Listener
}

// streamGroups groups gw's TLS and TCP listeners by port, ports ascending,
// listeners in spec order. A port whose listeners mix TLS and TCP, or mix
// either with HTTP or HTTPS, is an error: the controller marks such
// listeners Conflicted (ProtocolConflict) and leaves them out.
func streamGroups(gw *model.Gateway) ([]streamGroup, error) {
	byPort := map[uint32]*streamGroup{}
	httpPorts := map[uint32]bool{}
	for _, l := range gw.Listeners {
		if !model.StreamProtocol(l.Protocol) {
			httpPorts[l.Port] = true
			continue
		}
		g := byPort[l.Port]
		if g == nil {
			g = &streamGroup{port: l.Port, protocol: l.Protocol}
			byPort[l.Port] = g
		} else if g.protocol != l.Protocol {
			return nil, fmt.Errorf("gateway %s: port %d mixes %s and %s listeners", gw.ResourceName(), l.Port, g.protocol, l.Protocol)
		}
		g.listeners = append(g.listeners, l)
	}
	out := make([]streamGroup, 0, len(byPort))
	for _, g := range byPort {
		if httpPorts[g.port] {
			return nil, fmt.Errorf("gateway %s: port %d mixes %s and HTTP or HTTPS listeners", gw.ResourceName(), g.port, g.protocol)
		}
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].port < out[j].port })
	return out, nil
}

// StreamClaim is one route's claim on connections of a TLS or TCP port:
// those whose server name is Hostname ("*" for any: a TCP port, or a TLS
// listener and route without hostnames), through listener Listener.
type StreamClaim struct {
	Listener string
	Hostname string
	Route    *model.Route
}

// StreamPortClaims decides, for one port's TLS or TCP listeners (in spec
// order), which route gets the connections of each server name, by the
// Gateway API's rules:
//
//   - a TLSRoute claims on a listener the hostnames its spec.hostnames
//     share with the listener's (routeHostnames), less those another
//     listener of the port owns (listener isolation, OwnerHostname); a
//     TCPRoute claims every connection ("*") of its listener;
//   - when several routes claim one hostname, the route whose own matching
//     hostname is most specific wins (most characters of a non-wildcard
//     hostname, then most characters: TLSRouteSpec.hostnames precedence and
//     GatewayRouteHostnameIntersectionPrecedence, hostKey); then the oldest
//     route (creationTimestamp); then namespace/name alphabetically (the
//     Gateway API's conflict resolution, "Conflicts" in its API design
//     guide). Every other claim of that hostname loses: those routes get
//     none of its connections.
//
// won are the winning claims, in listener order then hostname; lost the
// others, in the same order. Routes without a rule are not counted.
func StreamPortClaims(listeners []model.Listener) (won, lost []StreamClaim) {
	hosts := make([]string, len(listeners))
	for i, l := range listeners {
		hosts[i] = l.Hostname
	}
	type claim struct {
		li    int
		host  string
		route *model.Route
	}
	var all []claim
	for li, l := range listeners {
		for _, r := range l.Routes {
			if len(r.Rules) == 0 {
				continue
			}
			if l.Protocol == gwv1.TCPProtocolType {
				all = append(all, claim{li, "*", r})
				continue
			}
			for _, h := range routeHostnames(l.Hostname, r.Hostnames) {
				if h == "*" || ownerHostname(h, hosts) == l.Hostname {
					all = append(all, claim{li, h, r})
				}
			}
		}
	}
	better := func(h string, a, b *model.Route) bool {
		ae, ac := hostKey(h, a.Hostnames)
		be, bc := hostKey(h, b.Hostnames)
		switch {
		case ae != be:
			return ae > be
		case ac != bc:
			return ac > bc
		case !a.CreationTimestamp.Equal(b.CreationTimestamp):
			return a.CreationTimestamp.Before(b.CreationTimestamp)
		}
		return model.CompareRoutes(a, b) < 0
	}
	// By hostname alone: a hostname is owned by one listener hostname
	// (OwnerHostname), and listeners of one port with the same hostname
	// conflict (the controller serves neither), so one chain, and one
	// route, per server name.
	winner := map[string]claim{}
	key := func(c claim) string { return c.host }
	for _, c := range all {
		if w, ok := winner[key(c)]; !ok || better(c.host, c.route, w.route) {
			winner[key(c)] = c
		}
	}
	for _, c := range all {
		sc := StreamClaim{Listener: listeners[c.li].Name, Hostname: c.host, Route: c.route}
		if winner[key(c)].route == c.route {
			won = append(won, sc)
		} else {
			lost = append(lost, sc)
		}
	}
	order := func(s []StreamClaim) {
		li := map[string]int{}
		for i, l := range listeners {
			li[l.Name] = i
		}
		slices.SortStableFunc(s, func(a, b StreamClaim) int {
			if c := cmp.Compare(li[a.Listener], li[b.Listener]); c != 0 {
				return c
			}
			if c := strings.Compare(a.Hostname, b.Hostname); c != 0 {
				return c
			}
			return model.CompareRoutes(a.Route, b.Route)
		})
	}
	order(won)
	order(lost)
	return won, lost
}

// buildStreamListener is the listener of a TLS or TCP port, or nil when no
// route gets any of its connections (Envoy refuses a listener without a
// filter chain, and a port without one refuses connections, as a route
// without backends must).
//
//   - TCP: one filter chain, its TCP proxy sending to the winning TCPRoute's
//     backends (StreamPortClaims).
//   - TLS: the TLS inspector, and one filter chain per listener and winning
//     TLSRoute, filter_chain_match.server_names the hostnames it wins (none
//     for "*"). On a Passthrough listener the chain has no transport socket:
//     the client's TLS reaches the backend untouched. On a Terminate
//     listener the chain terminates TLS with the listener's certificate over
//     SDS, as an HTTPS chain does, without ALPN (the bytes inside are not
//     HTTP), and the backend gets the plaintext.
//
// Each chain ends in tcp_proxy (tcpProxyFilter); its stat_prefix is the
// chain's name.
func buildStreamListener(g streamGroup, opts Options) (*listenerv3.Listener, error) {
	won, _ := StreamPortClaims(g.listeners)
	if len(won) == 0 {
		return nil, nil
	}
	l := &listenerv3.Listener{
		Name: ListenerName(g.port),
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address:       "0.0.0.0",
			PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: g.port},
		}}},
	}
	byName := map[string]model.Listener{}
	for _, gl := range g.listeners {
		byName[gl.Name] = gl
	}
	// One chain per (listener, route), in the order of their first claim.
	type chainKey struct {
		listener string
		route    *model.Route
	}
	var keys []chainKey
	names := map[chainKey][]string{}
	for _, c := range won {
		k := chainKey{c.Listener, c.Route}
		if _, ok := names[k]; !ok {
			keys = append(keys, k)
		}
		if c.Hostname != "*" {
			names[k] = append(names[k], c.Hostname)
		} else if names[k] == nil {
			names[k] = []string{}
		}
	}
	for _, k := range keys {
		gl := byName[k.listener]
		name := streamChainName(gl.Name, k.route)
		f, err := tcpProxyFilter(name, streamRule(k.route), gl.Protocol == gwv1.TLSProtocolType && gl.TLS == nil, opts)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %s %s/%s: %w", gl.Name, k.route.Kind, k.route.Namespace, k.route.Name, err)
		}
		fc := &listenerv3.FilterChain{Name: name, Filters: []*listenerv3.Filter{f}}
		if sn := names[k]; len(sn) > 0 {
			fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: sn}
		}
		if gl.TLS != nil {
			ts, err := downstreamTLS(gl, nil)
			if err != nil {
				return nil, err
			}
			fc.TransportSocket = ts
		}
		l.FilterChains = append(l.FilterChains, fc)
	}
	if g.protocol == gwv1.TLSProtocolType {
		inspector, err := toAny(&tlsinspectorv3.TlsInspector{})
		if err != nil {
			return nil, err
		}
		l.ListenerFilters = []*listenerv3.ListenerFilter{{
			Name:       ListenerFilterTLSInspector,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: inspector},
		}}
	}
	return l, nil
}

// streamChainName names a TLS or TCP port's filter chain: the Gateway
// listener's name and the route's kind, namespace and name.
func streamChainName(listener string, r *model.Route) string {
	return listener + "|" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

// streamRule is a TLSRoute's or TCPRoute's one rule (the CRDs allow exactly
// one); nil when it has none.
func streamRule(r *model.Route) *model.Rule {
	for i := range r.Rules {
		if r.Rules[i].Stream() {
			return &r.Rules[i]
		}
	}
	return nil
}

// tcpProxyFilter is the TCP proxy of one TLSRoute or TCPRoute rule: every
// connection goes to one of the rule's backends, in proportion to the
// backendRefs' weights (the Gateway API's "Support for weight"). A
// backendRef of weight 0 gets none (tcp_proxy refuses a weight of 0, so it
// is left out). A backend that did not resolve keeps its share, sent to
// InvalidBackendCluster: a cluster that does not exist, so Envoy closes
// those connections (TcpProxy's downstream_cx_no_route), which is what the
// Gateway API asks ("Connection rejections must respect weight"). With one
// share the filter names its cluster; with several, weighted_clusters
// (one entry per cluster, backendRefs to the same cluster summed, in
// backendRef order); with none (no backend of weight above 0, or no rule)
// every connection goes to InvalidBackendCluster. On a Passthrough chain
// (passthrough) a Service backend with client TLS (a BackendTLSPolicy's)
// counts as not resolved too: its cluster would wrap the client's TLS in
// a second TLS session the backend never expects, and BackendTLSPolicy
// applies to TLS the Gateway originates, which passthrough never does.
func tcpProxyFilter(statPrefix string, rule *model.Rule, passthrough bool, opts Options) (*listenerv3.Filter, error) {
	type share struct {
		cluster string
		weight  uint32
	}
	var shares []share
	if rule != nil {
		for i := range rule.Backends {
			b := &rule.Backends[i]
			if b.Weight <= 0 {
				continue
			}
			name := InvalidBackendCluster
			if c, _, ok := backendCluster(b, false, opts); ok && b.Pool == nil && (!passthrough || b.Service.TLS == nil) {
				name = c
			}
			if j := slices.IndexFunc(shares, func(s share) bool { return s.cluster == name }); j >= 0 {
				shares[j].weight += uint32(b.Weight)
				continue
			}
			shares = append(shares, share{name, uint32(b.Weight)})
		}
	}
	tp := &tcpproxyv3.TcpProxy{StatPrefix: statPrefix}
	switch len(shares) {
	case 0:
		tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: InvalidBackendCluster}
	case 1:
		tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: shares[0].cluster}
	default:
		wc := &tcpproxyv3.TcpProxy_WeightedCluster{}
		for _, s := range shares {
			wc.Clusters = append(wc.Clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: s.cluster, Weight: s.weight})
		}
		tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: wc}
	}
	a, err := toAny(tp)
	if err != nil {
		return nil, err
	}
	return &listenerv3.Filter{Name: NetworkFilterTCPProxy, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}}, nil
}

// tcpProxyClusters are the clusters a listener's TCP proxies name.
func tcpProxyClusters(l *listenerv3.Listener, memo anyMemo) ([]string, error) {
	var out []string
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			if f.GetTypedConfig() == nil || !f.GetTypedConfig().MessageIs((*tcpproxyv3.TcpProxy)(nil)) {
				continue
			}
			tp, err := unpackAs[*tcpproxyv3.TcpProxy](memo, f.GetTypedConfig())
			if err != nil {
				return nil, err
			}
			if c := tp.GetCluster(); c != "" {
				out = append(out, c)
			}
			for _, w := range tp.GetWeightedClusters().GetClusters() {
				out = append(out, w.GetName())
			}
		}
	}
	return out, nil
}
