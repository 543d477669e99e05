// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// streamRoute is a TLSRoute (hosts set) or TCPRoute (hosts nil) with one
// rule sending to backends, created minutes after 2026-01-01.
func streamRoute(ns, name string, minutes int, hosts []string, backends ...model.Backend) *model.Route {
	r := &model.Route{Kind: "TLSRoute", Namespace: ns, Name: name, Hostnames: hosts,
		CreationTimestamp: time.Date(2026, 1, 1, 0, minutes, 0, 0, time.UTC)}
	rule := model.Rule{Backends: backends}
	if hosts == nil {
		r.Kind, rule.TCP = "TCPRoute", &gwv1.TCPRouteRule{}
	} else {
		rule.TLS = &gwv1.TLSRouteRule{}
	}
	r.Rules = []model.Rule{rule}
	return r
}

func to(s *model.ServiceBackend, weight int32) model.Backend {
	return model.Backend{Service: s, Weight: weight}
}

func invalid(weight int32) model.Backend {
	return model.Backend{Weight: weight, Invalid: "service ns/missing not found"}
}

// tcpProxyOf is the TcpProxy of chain i of the listener on port.
func tcpProxyOf(t *testing.T, res Resources, port uint32, i int) (*listenerv3.FilterChain, *tcpproxyv3.TcpProxy) {
	t.Helper()
	for _, l := range res.Listeners {
		if l.GetName() != ListenerName(port) {
			continue
		}
		if i >= len(l.GetFilterChains()) {
			t.Fatalf("listener %s has %d chains, want more than %d", l.GetName(), len(l.GetFilterChains()), i)
		}
		fc := l.GetFilterChains()[i]
		var tp tcpproxyv3.TcpProxy
		if err := fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(&tp); err != nil {
			t.Fatal(err)
		}
		return fc, &tp
	}
	t.Fatalf("no listener on %d", port)
	return nil, nil
}

func tpTargets(tp *tcpproxyv3.TcpProxy) string {
	if c := tp.GetCluster(); c != "" {
		return c
	}
	var parts []string
	for _, w := range tp.GetWeightedClusters().GetClusters() {
		parts = append(parts, fmt.Sprintf("%s=%d", w.GetName(), w.GetWeight()))
	}
	return strings.Join(parts, ",")
}

// TestTCPRouteListener: a TCP listener is one filter chain whose tcp_proxy
// sends to the oldest TCPRoute's backends, in proportion to their weights;
// a backendRef of weight 0 is left out, an invalid one's share goes to
// InvalidBackendCluster (connections refused in proportion); a port
// without a route has no listener at all (Envoy refuses one without
// filter chains, and the port then refuses connections).
func TestTCPRouteListener(t *testing.T) {
	a, b, c := svc("ns", "a", 3000), svc("ns", "b", 3000), svc("ns", "c", 3000)
	ca, cb := ClusterName(3000, a.Host), ClusterName(3000, b.Host)
	newer := streamRoute("ns", "newer", 2, nil, to(c, 1))
	older := streamRoute("ns", "older", 1, nil, to(a, 70), to(b, 30), to(c, 0), invalid(10), to(a, 5))
	gw := &model.Gateway{Namespace: "ns", Name: "gw", Listeners: []model.Listener{
		{Name: "tcp", Port: 9300, Protocol: gwv1.TCPProtocolType, Routes: []*model.Route{newer, older}},
		{Name: "one", Port: 9301, Protocol: gwv1.TCPProtocolType, Routes: []*model.Route{streamRoute("ns", "one", 1, nil, to(a, 1))}},
		{Name: "bad", Port: 9302, Protocol: gwv1.TCPProtocolType, Routes: []*model.Route{streamRoute("ns", "bad", 1, nil, invalid(1), to(c, 0))}},
		{Name: "empty", Port: 9303, Protocol: gwv1.TCPProtocolType},
	}}
	res := build(t, gw, Inputs{}, Options{})
	if got := len(res.Listeners); got != 3 {
		t.Fatalf("%d listeners, want 3 (none for the port without a route)", got)
	}
	for _, tc := range []struct {
		port uint32
		want string
	}{
		{9300, fmt.Sprintf("%s=75,%s=30,%s=10", ca, cb, InvalidBackendCluster)},
		{9301, ca},
		{9302, InvalidBackendCluster},
	} {
		fc, tp := tcpProxyOf(t, res, tc.port, 0)
		if got := tpTargets(tp); got != tc.want {
			t.Errorf("port %d: tcp_proxy to %s, want %s", tc.port, got, tc.want)
		}
		if fc.GetFilterChainMatch() != nil || fc.GetTransportSocket() != nil {
			t.Errorf("port %d: a TCP chain matches nothing and has no TLS: %v", tc.port, fc)
		}
	}
	if l := res.Listeners[0]; len(l.GetFilterChains()) != 1 || len(l.GetListenerFilters()) != 0 {
		t.Errorf("TCP listener: %d chains, %d listener filters; want 1 and none", len(l.GetFilterChains()), len(l.GetListenerFilters()))
	}
	// The losing route's clusters exist all the same (a route's clusters
	// depend on it alone), and every cluster a tcp_proxy names exists.
	clusterNamed(t, res, ClusterName(3000, c.Host))
	clusterNamed(t, res, ca)
}

// TestTLSRouteListenerChains: a TLS port gets the TLS inspector and one
// chain per listener and winning TLSRoute, matching the server names it
// wins; a Passthrough listener's chains have no transport socket, a
// Terminate listener's terminate TLS with its certificate over SDS and
// offer no ALPN (what is inside is not HTTP).
func TestTLSRouteListenerChains(t *testing.T) {
	a, b := svc("ns", "a", 8443), svc("ns", "b", 3000)
	gw := &model.Gateway{Namespace: "ns", Name: "gw", Listeners: []model.Listener{
		{Name: "terminate", Port: 8883, Protocol: gwv1.TLSProtocolType, Hostname: "tls.example.com",
			TLS:    &model.ListenerTLS{CertificateRefs: []string{"ns/cert"}},
			Routes: []*model.Route{streamRoute("ns", "t", 1, []string{"tls.example.com"}, to(b, 1))}},
		{Name: "passthrough", Port: 8883, Protocol: gwv1.TLSProtocolType, Hostname: "*.example.com",
			Routes: []*model.Route{streamRoute("ns", "p", 1, []string{"abc.example.com", "x.example.com", "other.org"}, to(a, 1))}},
	}}
	res := build(t, gw, Inputs{}, Options{})
	l := res.Listeners[0]
	if len(l.GetListenerFilters()) != 1 || l.GetListenerFilters()[0].GetName() != ListenerFilterTLSInspector {
		t.Fatalf("listener filters %v, want the TLS inspector", l.GetListenerFilters())
	}
	fc0, tp0 := tcpProxyOf(t, res, 8883, 0)
	if sn := fc0.GetFilterChainMatch().GetServerNames(); !slices.Equal(sn, []string{"tls.example.com"}) || tpTargets(tp0) != ClusterName(3000, b.Host) {
		t.Errorf("terminate chain: server names %v to %s", sn, tpTargets(tp0))
	}
	var dtc tlsv3.DownstreamTlsContext
	if err := fc0.GetTransportSocket().GetTypedConfig().UnmarshalTo(&dtc); err != nil {
		t.Fatalf("terminate chain transport socket: %v", err)
	}
	if sds := dtc.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs(); len(sds) != 1 || sds[0].GetName() != SecretName("ns/cert") ||
		len(dtc.GetCommonTlsContext().GetAlpnProtocols()) != 0 {
		t.Errorf("terminate chain TLS: %v", &dtc)
	}
	fc1, tp1 := tcpProxyOf(t, res, 8883, 1)
	if sn := fc1.GetFilterChainMatch().GetServerNames(); !slices.Equal(sn, []string{"abc.example.com", "x.example.com"}) {
		t.Errorf("passthrough chain server names %v, want the route's hostnames under the listener's (not other.org)", sn)
	}
	if fc1.GetTransportSocket() != nil || tpTargets(tp1) != ClusterName(8443, a.Host) {
		t.Errorf("passthrough chain: transport socket %v, to %s", fc1.GetTransportSocket(), tpTargets(tp1))
	}
	secrets, err := SecretNames(res.Listeners, res.Clusters)
	if err != nil || !slices.Equal(secrets, []string{SecretName("ns/cert")}) {
		t.Errorf("SDS names %v (%v), want the terminating listener's certificate", secrets, err)
	}
}

// TestStreamPortClaims checks which TLSRoute gets a server name, by the
// Gateway API's rules: the route's own most specific matching hostname
// (not the listener/route intersection), then the oldest, then
// namespace/name; and listener isolation: a hostname another listener of
// the port owns is never claimed through a broader one, so a tenant's
// wildcard TLSRoute does not capture another tenant's listener's name.
func TestStreamPortClaims(t *testing.T) {
	s := svc("ns", "s", 443)
	wildOlder := streamRoute("ns", "wild-older", 1, []string{"*.example.com"}, to(s, 1))
	exactNewer := streamRoute("ns", "exact-newer", 9, []string{"abc.example.com"}, to(s, 1))
	sameA := streamRoute("zz", "same", 5, []string{"tie.example.com"}, to(s, 1))
	sameB := streamRoute("aa", "same", 5, []string{"tie.example.com"}, to(s, 1))
	oldest := streamRoute("ns", "oldest", 0, []string{"old.example.com"}, to(s, 1))
	young := streamRoute("ns", "young", 3, []string{"old.example.com"}, to(s, 1))
	tenantA := streamRoute("tenant-a", "grab", 0, []string{"*.example.com", "b.example.com"}, to(s, 1))
	tenantB := streamRoute("tenant-b", "mine", 5, []string{"b.example.com"}, to(s, 1))
	// As many characters, the wildcard older: the exact one wins all the same.
	exactAB := streamRoute("ns", "exact-ab", 8, []string{"a.b.example.com"}, to(s, 1))
	wildAB := streamRoute("ns", "wild-ab", 0, []string{"*.b.example.com"}, to(s, 1))
	listeners := []model.Listener{
		{Name: "ab", Port: 443, Protocol: gwv1.TLSProtocolType, Hostname: "a.b.example.com",
			Routes: []*model.Route{exactAB, wildAB}},
		{Name: "exact", Port: 443, Protocol: gwv1.TLSProtocolType, Hostname: "abc.example.com",
			Routes: []*model.Route{exactNewer, wildOlder}},
		{Name: "wild", Port: 443, Protocol: gwv1.TLSProtocolType, Hostname: "*.example.com",
			Routes: []*model.Route{sameA, sameB, oldest, young, tenantA}},
		{Name: "tenant-b", Port: 443, Protocol: gwv1.TLSProtocolType, Hostname: "b.example.com",
			Routes: []*model.Route{tenantB}},
	}
	won, lost := StreamPortClaims(listeners)
	str := func(cs []StreamClaim) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Listener+" "+c.Hostname+" "+c.Route.Namespace+"/"+c.Route.Name)
		}
		return out
	}
	wantWon := []string{
		"ab a.b.example.com ns/exact-ab",       // exact beats an older wildcard of as many characters
		"exact abc.example.com ns/exact-newer", // exact route hostname beats the older wildcard
		"wild *.example.com tenant-a/grab",     // the only claim of the wildcard
		"wild old.example.com ns/oldest",       // oldest
		"wild tie.example.com aa/same",         // then namespace/name
		"tenant-b b.example.com tenant-b/mine", // b.example.com is tenant-b's listener's, not tenant-a's
	}
	wantLost := []string{
		"ab a.b.example.com ns/wild-ab",
		"exact abc.example.com ns/wild-older",
		"wild old.example.com ns/young",
		"wild tie.example.com zz/same",
	}
	if got := str(won); !slices.Equal(got, wantWon) {
		t.Errorf("won:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantWon, "\n"))
	}
	if got := str(lost); !slices.Equal(got, wantLost) {
		t.Errorf("lost:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantLost, "\n"))
	}
	// The listener: every server name in exactly one chain.
	res := build(t, &model.Gateway{Namespace: "ns", Name: "gw", Listeners: listeners}, Inputs{}, Options{})
	seen := map[string]string{}
	for _, fc := range res.Listeners[0].GetFilterChains() {
		for _, sn := range fc.GetFilterChainMatch().GetServerNames() {
			if prev, dup := seen[sn]; dup {
				t.Errorf("server name %s in chains %s and %s", sn, prev, fc.GetName())
			}
			seen[sn] = fc.GetName()
		}
	}
	if got := seen["b.example.com"]; got != streamChainName("tenant-b", tenantB) {
		t.Errorf("b.example.com goes to chain %q, want tenant-b's", got)
	}
}

// TestStreamListenerErrors: a port mixing TLS and TCP, or either with HTTP,
// cannot be translated (the controller marks such listeners conflicted);
// Validate refuses a tcp_proxy naming a cluster CDS lacks.
func TestStreamListenerErrors(t *testing.T) {
	for name, ls := range map[string][]model.Listener{
		"tls+tcp":  {{Name: "a", Port: 1, Protocol: gwv1.TLSProtocolType}, {Name: "b", Port: 1, Protocol: gwv1.TCPProtocolType}},
		"tcp+http": {{Name: "a", Port: 1, Protocol: gwv1.TCPProtocolType}, {Name: "b", Port: 1, Protocol: gwv1.HTTPProtocolType}},
	} {
		if _, err := BuildListeners(&model.Gateway{Namespace: "ns", Name: "gw", Listeners: ls}, Options{}); err == nil || !strings.Contains(err.Error(), "mixes") {
			t.Errorf("%s: error %v, want a port that mixes protocols", name, err)
		}
	}
	gw := &model.Gateway{Namespace: "ns", Name: "gw", Listeners: []model.Listener{{Name: "tcp", Port: 9300, Protocol: gwv1.TCPProtocolType,
		Routes: []*model.Route{streamRoute("ns", "r", 1, nil, to(svc("ns", "a", 1), 1))}}}}
	res := build(t, gw, Inputs{}, Options{})
	res.Clusters, res.Endpoints = nil, nil
	if err := Validate(res); err == nil || !strings.Contains(err.Error(), `tcp_proxy: cluster "outbound|1||a.ns.svc.cluster.local" is not in CDS`) {
		t.Errorf("Validate: %v", err)
	}
}

// TestTranslatorFollowsStreamRoutes: the incremental Translator rebuilds a
// TLS or TCP listener when its routes change (they are its filter chains)
// and keeps it, the same message, when they do not; its output is always
// the full translation's.
func TestTranslatorFollowsStreamRoutes(t *testing.T) {
	a, b := svc("ns", "a", 3000), svc("ns", "b", 3000)
	tr := NewTranslator(Options{})
	mk := func(routes ...*model.Route) *model.Gateway {
		return &model.Gateway{Namespace: "ns", Name: "gw", Listeners: []model.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Routes: []*model.Route{httpRoute("ns", "h", nil, model.Rule{Backends: []model.Backend{to(a, 1)}})}},
			{Name: "tcp", Port: 9300, Protocol: gwv1.TCPProtocolType, Routes: routes},
		}}
	}
	r1 := streamRoute("ns", "r", 1, nil, to(a, 1))
	r2 := streamRoute("ns", "r", 1, nil, to(b, 1))
	r3 := *r2 // equal, behind a new pointer (sameRoute)
	r3.Rules = slices.Clone(r2.Rules)
	var prev Resources
	for i, gw := range []*model.Gateway{mk(), mk(r1), mk(r1), mk(r2), mk(&r3), mk()} {
		got, err := tr.Build(gw, Inputs{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := fullTranslation(gw, Inputs{}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := sameBytes(got, want); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if (i == 2 || i == 4) && got.Listeners[len(got.Listeners)-1] != prev.Listeners[len(prev.Listeners)-1] {
			t.Errorf("step %d: the TCP listener was translated again though its routes did not change", i)
		}
		prev = got
	}
}
