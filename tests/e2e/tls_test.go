// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/dataplane"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/test/certs"
)

// tlsGateway has HTTPS listeners on 443 named after their hostnames ("" for
// none), each with the Secret ns/<name>.
func tlsGateway(hosts ...string) *model.Gateway {
	gw := &model.Gateway{Namespace: "ns", Name: "gw"}
	for _, h := range hosts {
		name := "any"
		if h != "" {
			name = strings.ReplaceAll(strings.ReplaceAll(h, "*", "wild"), ".", "-")
		}
		gw.Listeners = append(gw.Listeners, model.Listener{Name: name, Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: h,
			TLS: &model.ListenerTLS{CertificateRefs: []string{"ns/" + name}}})
	}
	return gw
}

// tlsResources are the translator's listener and route configurations for
// gw (one per HTTPS filter chain), and an SDS secret per listener whose
// certificate's common name is the listener's name.
func tlsResources(t *testing.T, gw *model.Gateway) (*listenerv3.Listener, []proto.Message, []*tlsv3.Secret) {
	t.Helper()
	ls, err := core.BuildListeners(gw, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rcs, err := core.BuildRouteConfigurations(gw, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var secrets []*tlsv3.Secret
	for _, l := range gw.Listeners {
		secrets = append(secrets, sdsSecret(t, l.Name))
	}
	var routes []proto.Message
	for _, rc := range rcs {
		routes = append(routes, rc)
	}
	return ls[0], routes, secrets
}

// sdsSecret is the SDS secret ns/<name> with a new certificate for
// common name name (and DNS names *.example.com, a.example.com).
func sdsSecret(t *testing.T, name string) *tlsv3.Secret {
	t.Helper()
	crt, key, err := certs.SelfSignedFor(name, nil, []string{"a.example.com", "*.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := core.BuildSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": crt, "tls.key": key}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handshake connects to the listener on 443 with server name sni and
// ALPN protos; it returns the connection (closed at cleanup) or the error.
func handshake(t *testing.T, dp *dataplane.DataPlane, sni string, protos ...string) (*tls.Conn, error) {
	t.Helper()
	a := dp.Addr(443)
	if a == nil {
		t.Fatal("no listener on 443")
	}
	c, err := tls.Dial("tcp", a.String(), &tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: protos}) //nolint:gosec // the test reads the certificate served
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, nil
}

func servedCN(c *tls.Conn) string { return c.ConnectionState().PeerCertificates[0].Subject.CommonName }

// TestFilterChainMatchBySNI checks Envoy's filter chain selection on a TLS
// listener (filter_chain_manager_impl.cc findFilterChainForServerName;
// FilterChainMatch.server_names in the Listener API reference): an exact
// server name first, then the longest wildcard, then the chain without
// server_names; with none matching, the connection is closed.
func TestFilterChainMatchBySNI(t *testing.T) {
	dp := newTestDP(t, dataplane.Options{})
	l, rc, secrets := tlsResources(t, tlsGateway("a.example.com", "*.example.com", "*.b.example.com", ""))
	load(t, dp, append(rc, l)...)
	for _, s := range secrets {
		load(t, dp, s)
	}
	for _, tc := range []struct{ sni, chain string }{
		{"a.example.com", "a-example-com"},        // exact beats *.example.com
		{"c.example.com", "wild-example-com"},     // wildcard
		{"x.b.example.com", "wild-b-example-com"}, // the longest wildcard
		{"x.y.example.com", "wild-example-com"},   // a wildcard covers several labels
		{"example.com", "any"},                    // *.example.com needs a label before it
		{"other.org", "any"},                      // no server name matches
		{"", "any"},                               // no SNI
		{"A.EXAMPLE.COM", "any"},                  // matched as sent (stricter)
	} {
		c, err := handshake(t, dp, tc.sni)
		if err != nil {
			t.Fatalf("SNI %q: %v", tc.sni, err)
		}
		if got := servedCN(c); got != tc.chain {
			t.Errorf("SNI %q served by chain %s, want %s", tc.sni, got, tc.chain)
		}
	}

	// Without a chain lacking server_names, an unmatched name is refused.
	dp2 := newTestDP(t, dataplane.Options{})
	l2, rc2, secrets2 := tlsResources(t, tlsGateway("a.example.com"))
	load(t, dp2, append(rc2, l2, secrets2[0])...)
	if _, err := handshake(t, dp2, "a.example.com"); err != nil {
		t.Fatalf("matching SNI refused: %v", err)
	}
	for _, sni := range []string{"b.example.com", ""} {
		if _, err := handshake(t, dp2, sni); err == nil {
			t.Errorf("SNI %q: handshake succeeded with no matching filter chain", sni)
		}
	}
	if n := dp2.Counters().NoFilterChainMatch; n != 2 {
		t.Errorf("NoFilterChainMatch = %d, want 2", n)
	}
}

// TestSDSWarmsTheListener: a listener whose SDS secret has not arrived is
// not served (the secret's subscription is an init target of the listener
// in Envoy, source/common/secret/sds_api.cc and the listener's init
// manager), so its port refuses connections; it is served once the secret
// arrives.
func TestSDSWarmsTheListener(t *testing.T) {
	dp := newTestDP(t, dataplane.Options{})
	l, rc, secrets := tlsResources(t, tlsGateway("a.example.com"))
	load(t, dp, append(rc, l)...)
	if a := dp.Addr(443); a != nil {
		t.Fatalf("listener served at %s without its certificate", a)
	}
	if _, ok := dp.Snapshot().Listeners[l.Name]; ok {
		t.Fatal("listener active without its SDS secret")
	}
	load(t, dp, secrets[0])
	c, err := handshake(t, dp, "a.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if servedCN(c) != "a-example-com" {
		t.Errorf("served %s", servedCN(c))
	}
}

// TestSDSRotationAppliesToNewHandshakes: a new version of the secret is
// used by the next handshake; a connection already open keeps working, and
// the listener is not rebound (no drain). Envoy: SdsApi::onConfigUpdate
// (source/common/secret/sds_api.cc) runs the secret's update callbacks,
// which rebuild the transport socket factory's TLS context for new
// connections only (the SDS configuration overview, "Secret discovery
// service (SDS)": certificates are rotated without a listener update).
func TestSDSRotationAppliesToNewHandshakes(t *testing.T) {
	dp := newTestDP(t, dataplane.Options{})
	l, rc, secrets := tlsResources(t, tlsGateway("a.example.com"))
	load(t, dp, append(rc, l, secrets[0])...)
	addr := dp.Addr(443).String()
	old, err := handshake(t, dp, "a.example.com", "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	oldSerial := old.ConnectionState().PeerCertificates[0].SerialNumber
	request := func(c *tls.Conn) int {
		t.Helper()
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a.example.com\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := request(old); code != http.StatusNotFound {
		t.Fatalf("status %d, want 404 (no routes)", code)
	}
	rotated := sdsSecret(t, "a-example-com")
	load(t, dp, rotated)
	if dp.Addr(443).String() != addr {
		t.Fatal("the listener was rebound on a secret rotation")
	}
	c, err := handshake(t, dp, "a.example.com")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := x509.ParseCertificate(mustPEMBlock(t, rotated.GetTlsCertificate().GetCertificateChain().GetInlineBytes()))
	if got := c.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(want.SerialNumber) != 0 || got.Cmp(oldSerial) == 0 {
		t.Errorf("new handshake served serial %v, want the rotated %v", got, want.SerialNumber)
	}
	if code := request(old); code != http.StatusNotFound {
		t.Errorf("the connection opened before the rotation: status %d", code)
	}
}

// TestALPN: a chain's alpn_protocols are offered (CommonTlsContext.
// alpn_protocols in the TLS transport socket's API reference;
// ServerContextImpl's ALPN select callback, source/common/tls/
// server_context_impl.cc); h2 gives HTTP/2 to the connection manager
// (HttpConnectionManager.codec_type AUTO picks the codec from ALPN), http/1.1
// HTTP/1.1.
func TestALPN(t *testing.T) {
	dp := newTestDP(t, dataplane.Options{})
	l, rc, secrets := tlsResources(t, tlsGateway("a.example.com"))
	load(t, dp, append(rc, l, secrets[0])...)
	for _, tc := range []struct {
		offer     []string
		negotiate string
		proto     string
	}{
		{[]string{"h2", "http/1.1"}, "h2", "HTTP/2.0"},
		{[]string{"http/1.1"}, "http/1.1", "HTTP/1.1"},
	} {
		c, err := handshake(t, dp, "a.example.com", tc.offer...)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ConnectionState().NegotiatedProtocol; got != tc.negotiate {
			t.Errorf("offer %v: negotiated %q, want %q", tc.offer, got, tc.negotiate)
		}
		_ = c.Close()
		tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: "a.example.com", InsecureSkipVerify: true, NextProtos: tc.offer}} //nolint:gosec // test
		if tc.negotiate == "h2" {
			tr.ForceAttemptHTTP2 = true
		}
		req, err := http.NewRequest("GET", "https://"+dp.Addr(443).String()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "a.example.com" // the chain's own hostname: no route, 404 (another Host is 421)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.Proto != tc.proto || resp.StatusCode != http.StatusNotFound {
			t.Errorf("offer %v: %s %d, want %s 404", tc.offer, resp.Proto, resp.StatusCode, tc.proto)
		}
	}
}

// TestTLSListenerRefusals: what Envoy rejects, and what the data plane
// does not implement, is a NACK:
//
//   - server_names without the TLS inspector listener filter: in Envoy such
//     a chain never matches (no SNI is read without the inspector; the
//     tls_inspector listener filter documentation); refused here, stricter;
//   - two chains with the same match: Envoy refuses the listener
//     ("multiple filter chains with the same matching rules are defined",
//     FilterChainManagerImpl::addFilterChains, source/common/
//     listener_manager/filter_chain_manager_impl.cc);
//   - a chain without TLS beside TLS chains: not implemented;
//   - a secret whose key is not its certificate's: Envoy's TLS context
//     cannot be built from it (SdsApi::onConfigUpdate throws from the
//     update callback, and the update is rejected), so it is NACKed, never
//     quoting the key.
func TestTLSListenerRefusals(t *testing.T) {
	base, _, secrets := tlsResources(t, tlsGateway("a.example.com", ""))
	mutate := func(f func(l *listenerv3.Listener)) *listenerv3.Listener {
		l := proto.Clone(base).(*listenerv3.Listener)
		f(l)
		return l
	}
	for _, tc := range []struct {
		name string
		l    *listenerv3.Listener
		want string
	}{
		{"server_names without the TLS inspector", mutate(func(l *listenerv3.Listener) { l.ListenerFilters = nil }), "never match"},
		{"two chains without server_names", mutate(func(l *listenerv3.Listener) { l.FilterChains[0].FilterChainMatch = nil }), "same matching rules"},
		{"two chains for one server name", mutate(func(l *listenerv3.Listener) {
			l.FilterChains[1].FilterChainMatch = proto.Clone(l.FilterChains[0].FilterChainMatch).(*listenerv3.FilterChainMatch)
		}), "same matching rules"},
		{"a chain without TLS", mutate(func(l *listenerv3.Listener) { l.FilterChains[1].TransportSocket = nil }), "without TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := anypb.New(tc.l)
			if err != nil {
				t.Fatal(err)
			}
			err = dataplane.Validate(a)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decode: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// An SDS initial_fetch_timeout would let Envoy's listener go warm
	// without its certificate when it fires (the subscription's init target
	// is then ready), and every handshake fail: not implemented.
	late := mutateDownstreamTLS(t, base, func(d *tlsv3.DownstreamTlsContext) {
		d.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetSdsConfig().InitialFetchTimeout = durationpb.New(time.Second)
	})
	if err := decodeMsg(t, resourcev3.ListenerType, late); err == nil || !strings.Contains(err.Error(), "initial_fetch_timeout") {
		t.Errorf("SDS initial_fetch_timeout 1s: %v, want a NACK naming it", err)
	}

	bad := proto.Clone(secrets[0]).(*tlsv3.Secret)
	bad.GetTlsCertificate().GetPrivateKey().Specifier = secrets[1].GetTlsCertificate().GetPrivateKey().Specifier
	a, err := anypb.New(bad)
	if err != nil {
		t.Fatal(err)
	}
	err = dataplane.Validate(a)
	if err == nil || strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("a secret whose key is not its certificate's: %v (must be refused, never quoting the key)", err)
	}
}

func mustPEMBlock(t *testing.T, b []byte) []byte {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("no PEM block")
	}
	return blk.Bytes
}

// TestMisdirectedRequestIs421 runs the Gateway API suite's
// HTTPRouteHTTPSListenerDetectMisdirectedRequests cases through what the
// translator builds: each HTTPS filter chain (chosen by SNI, Envoy's
// findFilterChainForServerName) has its own route configuration, so a Host
// that another listener of the port owns is answered 421 by the chain's
// direct_response, a Host the chain's listener owns but no route serves
// 404, and a matching Host reaches its listener's route only. Envoy has no
// 421 of its own: the answer is the route configuration's
// (DirectResponseAction). The backend sees x-forwarded-proto https, as
// Envoy's connection manager sets it from the connection's TLS
// (ConnectionManagerUtility::mutateRequestHeaders, source/common/http/
// conn_manager_utility.cc, with use_remote_address).
func TestMisdirectedRequestIs421(t *testing.T) {
	gw := tlsGateway("", "second-example.org", "*.wildcard.org", "fourth-example.wildcard.org")
	backends := map[string]string{}
	inputs := core.Inputs{Endpoints: map[string][]core.Endpoint{}}
	route := func(listener int, name, be string, hosts ...string) {
		svc := &model.ServiceBackend{Host: be + ".ns.svc.cluster.local", Port: 8080}
		if _, ok := backends[be]; !ok {
			s := backend(t, be)
			host, portStr, _ := net.SplitHostPort(s.Listener.Addr().String())
			port, _ := strconv.Atoi(portStr)
			inputs.Endpoints[core.ClusterName(8080, svc.Host)] = []core.Endpoint{{Address: host, Port: uint32(port)}}
			backends[be] = host
		}
		gw.Listeners[listener].Routes = append(gw.Listeners[listener].Routes, &model.Route{
			Kind: "HTTPRoute", Namespace: "ns", Name: name, Hostnames: hosts,
			Rules: []model.Rule{{HTTP: &gwv1.HTTPRouteRule{}, Backends: []model.Backend{{Weight: 1, Service: svc}}}},
		})
	}
	route(0, "test-1", "v1", "example.org")
	route(1, "test-2", "v2")
	route(2, "test-3", "v3")
	route(3, "test-4", "v1")
	res, err := core.BuildGateway(gw, inputs, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dp := newTestDP(t, dataplane.Options{})
	var secrets []proto.Message // before the listener that waits for them
	for _, l := range gw.Listeners {
		secrets = append(secrets, sdsSecret(t, l.Name))
	}
	load(t, dp, append(secrets, resourcesOf(res)...)...)

	for _, tc := range []struct {
		sni, host string
		status    int
		backend   string
	}{
		{"example.org", "example.org", 200, "v1"},
		{"example.org", "second-example.org", 421, ""},
		{"example.org", "unknown-example.org", 404, ""},
		{"second-example.org", "second-example.org", 200, "v2"},
		{"second-example.org", "example.org", 421, ""},
		{"second-example.org", "unknown-example.org", 421, ""},
		{"third-example.wildcard.org", "third-example.wildcard.org", 200, "v3"},
		{"third-example.wildcard.org", "fith-example.wildcard.org", 200, "v3"},
		{"third-example.wildcard.org", "fourth-example.wildcard.org", 421, ""},
		{"third-example.wildcard.org", "second-example.org", 421, ""},
		{"third-example.wildcard.org", "unknown-example.org", 421, ""},
		{"fourth-example.wildcard.org", "fourth-example.wildcard.org", 200, "v1"},
		{"fourth-example.wildcard.org", "fith-example.wildcard.org", 421, ""},
		{"unknown-example.org", "example.org", 200, "v1"},
		{"unknown-example.org", "unknown-example.org", 404, ""},
	} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: tc.sni, InsecureSkipVerify: true, NextProtos: []string{"h2"}}, ForceAttemptHTTP2: true} //nolint:gosec // test
		req, err := http.NewRequest("GET", "https://"+dp.Addr(443).String()+"/detect-misdirected-requests", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != tc.status || resp.Header.Get("x-backend") != tc.backend {
			t.Errorf("SNI %s, Host %s: %d from %q; want %d from %q", tc.sni, tc.host, resp.StatusCode, resp.Header.Get("x-backend"), tc.status, tc.backend)
		}
		if tc.backend != "" && resp.Header.Get("x-seen-xfp") != "https" {
			t.Errorf("SNI %s, Host %s: the backend saw x-forwarded-proto %q, want https", tc.sni, tc.host, resp.Header.Get("x-seen-xfp"))
		}
	}
}
