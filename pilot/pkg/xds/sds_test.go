// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"bytes"
	"encoding/base64"
	"io"
	"maps"
	"net/http"
	"slices"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/test/certs"
)

// httpsGateway is a Gateway ns/name whose one listener terminates TLS on
// 443 for host with the Secret secretKey, routing to a pool.
func httpsGateway(ns, name, host, secretKey string) model.Gateway {
	gw := seedmodel.GatewayWith(ns, name, ns, name+"-route", host,
		seedmodel.PoolBackend(ns, name+"-pool", name+"-pool-ip-00000000", "FailClose"))
	gw.Listeners[0].Protocol, gw.Listeners[0].Port = gwv1.HTTPSProtocolType, 443
	gw.Listeners[0].Hostname = host
	gw.Listeners[0].TLS = &model.ListenerTLS{CertificateRefs: []string{secretKey}}
	return gw
}

func tlsSecretFor(t *testing.T, ns, name, host string) *corev1.Secret {
	t.Helper()
	crt, key, err := certs.SelfSignedFor(host, nil, []string{host})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": crt, "tls.key": key}}
}

func secretsOf(t *testing.T, r *discoveryv3.DiscoveryResponse) map[string]*tlsv3.Secret {
	t.Helper()
	out := map[string]*tlsv3.Secret{}
	for _, a := range r.GetResources() {
		var s tlsv3.Secret
		if err := a.UnmarshalTo(&s); err != nil {
			t.Fatal(err)
		}
		out[s.Name] = &s
	}
	return out
}

// TestSDSOnlyToTheGatewayThatNamesIt: a proxy gets over SDS only the
// certificates its own Gateway's listeners name. A proxy of another
// Gateway that asks for them (or for a Secret no Gateway names) gets
// nothing.
func TestSDSOnlyToTheGatewayThatNamesIt(t *testing.T) {
	a := tlsSecretFor(t, "a", "cert", "a.example.com")
	b := tlsSecretFor(t, "b", "cert", "b.example.com")
	unused := tlsSecretFor(t, "a", "unused", "u.example.com")
	e := newEnv(t, envOptions{
		gateways: []model.Gateway{httpsGateway("a", "gw", "a.example.com", "a/cert"), httpsGateway("b", "gw", "b.example.com", "b/cert")},
		secrets:  []*corev1.Secret{a, b, unused},
	})
	all := []string{core.SecretName("a/cert"), core.SecretName("b/cert"), core.SecretName("a/unused")}

	pa := e.sotw(node("proxy-a", "a", "gw"))
	pa.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: all})
	got := secretsOf(t, pa.recv())
	if len(got) != 1 || got[core.SecretName("a/cert")] == nil {
		t.Fatalf("proxy of a/gw got secrets %v, want only its own", slices.Collect(maps.Keys(got)))
	}
	if k := got[core.SecretName("a/cert")].GetTlsCertificate().GetPrivateKey().GetInlineBytes(); !bytes.Equal(k, a.Data["tls.key"]) {
		t.Error("the served private key is not the Secret's tls.key")
	}

	pb := e.sotw(node("proxy-b", "b", "gw"))
	pb.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{core.SecretName("a/cert"), core.SecretName("a/unused")}})
	pb.quiet("a proxy of b/gw asked for a/gw's certificate")

	d := e.delta(node("proxy-b-delta", "b", "gw"))
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNamesSubscribe: all})
	r := d.recv()
	if len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != core.SecretName("b/cert") {
		var names []string
		for _, x := range r.GetResources() {
			names = append(names, x.GetName())
		}
		t.Fatalf("delta proxy of b/gw got %v, want only %s", names, core.SecretName("b/cert"))
	}
}

// TestSDSRotationChangesOnlyTheSecret: a new certificate in the Secret
// reaches the proxy as a new SDS version, and no LDS response follows (the
// listener is unchanged, so Envoy does not drain it).
func TestSDSRotationChangesOnlyTheSecret(t *testing.T) {
	sec := tlsSecretFor(t, "a", "cert", "a.example.com")
	e := newEnv(t, envOptions{gateways: []model.Gateway{httpsGateway("a", "gw", "a.example.com", "a/cert")}, secrets: []*corev1.Secret{sec}})
	p := e.sotw(node("proxy", "a", "gw"))
	p.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	lds := p.recv()
	p.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType, VersionInfo: lds.VersionInfo, ResponseNonce: lds.Nonce})
	name := core.SecretName("a/cert")
	p.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{name}})
	sds := p.recv()
	if sds.TypeUrl != resourcev3.SecretType {
		t.Fatalf("got %s, want SDS", sds.TypeUrl)
	}
	p.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{name}, VersionInfo: sds.VersionInfo, ResponseNonce: sds.Nonce})
	p.quiet("nothing changed")

	rotated := tlsSecretFor(t, "a", "cert", "a.example.com")
	e.secrets.UpdateObject(rotated)
	next := p.recv()
	if next.TypeUrl != resourcev3.SecretType || next.VersionInfo == sds.VersionInfo {
		t.Fatalf("after rotation got %s version %s, want a new SDS version", next.TypeUrl, next.VersionInfo)
	}
	if got := secretsOf(t, next)[name].GetTlsCertificate().GetCertificateChain().GetInlineBytes(); !bytes.Equal(got, rotated.Data["tls.crt"]) {
		t.Error("the rotated certificate was not served")
	}
	p.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{name}, VersionInfo: next.VersionInfo, ResponseNonce: next.Nonce})
	p.quiet("a rotation must not re-send the listener")

	// A Secret that turns invalid is not served; the proxy keeps the last
	// certificate it received (nothing is sent).
	broken := rotated.DeepCopy()
	broken.Data["tls.key"] = []byte("garbage")
	e.secrets.UpdateObject(broken)
	p.quiet("an invalid Secret is not served")
}

// TestConfigDumpRedactsPrivateKeys: /debug/config_dump shows the Gateway's
// secrets as Envoy's admin does, with the private key "[redacted]".
func TestConfigDumpRedactsPrivateKeys(t *testing.T) {
	sec := tlsSecretFor(t, "a", "cert", "a.example.com")
	e := newEnv(t, envOptions{gateways: []model.Gateway{httpsGateway("a", "gw", "a.example.com", "a/cert")}, secrets: []*corev1.Secret{sec}})
	p := e.sotw(node("proxy", "a", "gw"))
	p.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{core.SecretName("a/cert")}})
	p.recv() // published
	resp, err := http.Get(e.http.URL + "/debug/config_dump?gateway=a/gw")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	redacted := base64.StdEncoding.EncodeToString([]byte("[redacted]"))
	if !bytes.Contains(body, []byte("SecretsConfigDump")) || !bytes.Contains(body, []byte(redacted)) {
		t.Fatalf("config_dump has no redacted secret:\n%s", body)
	}
	if bytes.Contains(body, []byte(base64.StdEncoding.EncodeToString(sec.Data["tls.key"]))) || bytes.Contains(body, []byte("PRIVATE KEY")) {
		t.Fatal("config_dump shows the private key")
	}
	if !bytes.Contains(body, []byte(base64.StdEncoding.EncodeToString(sec.Data["tls.crt"]))) {
		t.Error("config_dump does not show the certificate chain (only the key is sensitive)")
	}
	// The served entry keeps its key.
	p2 := e.sotw(node("proxy2", "a", "gw"))
	p2.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{core.SecretName("a/cert")}})
	if k := secretsOf(t, p2.recv())[core.SecretName("a/cert")].GetTlsCertificate().GetPrivateKey().GetInlineBytes(); !bytes.Equal(k, sec.Data["tls.key"]) {
		t.Error("redacting the dump changed the served secret")
	}
}

// TestSDSAnotherGatewaysSecretNeverSent: a proxy that subscribes to the
// SDS name of another Gateway's certificate gets nothing, neither when it
// asks nor when that Secret rotates (a publish answers only the watches of
// the Gateways that name it). The owner's proxy receiving the rotation, then
// a listener request answered on the asking stream, bound the wait: any
// answer to the SDS watch would have been written before either.
func TestSDSAnotherGatewaysSecretNeverSent(t *testing.T) {
	a := tlsSecretFor(t, "a", "cert", "a.example.com")
	b := tlsSecretFor(t, "b", "cert", "b.example.com")
	e := newEnv(t, envOptions{
		gateways: []model.Gateway{httpsGateway("a", "gw", "a.example.com", "a/cert"), httpsGateway("b", "gw", "b.example.com", "b/cert")},
		secrets:  []*corev1.Secret{a, b},
	})
	name := core.SecretName("a/cert")
	owner := e.sotw(node("proxy-a", "a", "gw"))
	owner.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{name}})
	first := owner.recv()

	sotw := e.sotw(node("proxy-b", "b", "gw"))
	sotw.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{name}})
	delta := e.delta(node("proxy-b-delta", "b", "gw"))
	delta.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNamesSubscribe: []string{name}})
	// Delta answers a first subscription at once, with nothing of a's.
	if r := delta.recv(); len(r.GetResources()) != 0 {
		t.Fatalf("delta proxy of b/gw asked for %s and got %d resources", name, len(r.GetResources()))
	}

	owner.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{name}, VersionInfo: first.VersionInfo, ResponseNonce: first.Nonce})
	e.secrets.UpdateObject(tlsSecretFor(t, "a", "cert", "a.example.com"))
	if r := owner.recv(); r.GetTypeUrl() != resourcev3.SecretType || r.GetVersionInfo() == first.GetVersionInfo() {
		t.Fatalf("the owner got %s version %s after the rotation, want a new SDS version", r.GetTypeUrl(), r.GetVersionInfo())
	}

	sotw.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	for r := sotw.recv(); r.GetTypeUrl() != resourcev3.ListenerType; r = sotw.recv() {
		if len(r.GetResources()) > 0 {
			t.Fatalf("SotW proxy of b/gw got a %s response with %d resources, having asked only for %s", r.GetTypeUrl(), len(r.GetResources()), name)
		}
	}
	delta.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	for r := delta.recv(); r.GetTypeUrl() != resourcev3.ListenerType; r = delta.recv() {
		if len(r.GetResources()) > 0 {
			t.Fatalf("delta proxy of b/gw got a %s response with %d resources, having asked only for %s", r.GetTypeUrl(), len(r.GetResources()), name)
		}
	}
}

// gatewayGainingHTTPS is Gateway a/gw as plain, its one HTTP listener with
// route host, and as withHTTPS, the same plus listener https:443
// terminating TLS with the Secret a/cert and carrying the same route.
func gatewayGainingHTTPS(host string) (plain, withHTTPS model.Gateway) {
	plain = seedmodel.GatewayWith("a", "gw", "a", "gw-route", host,
		seedmodel.PoolBackend("a", "gw-pool", "gw-pool-ip-00000000", "FailClose"))
	withHTTPS = plain
	https := plain.Listeners[0]
	https.Name, https.Protocol, https.Port = "https", gwv1.HTTPSProtocolType, 443
	https.TLS = &model.ListenerTLS{CertificateRefs: []string{"a/cert"}}
	withHTTPS.Listeners = []model.Listener{plain.Listeners[0], https}
	return plain, withHTTPS
}

// TestSDSListenerAddedToGateway: a Gateway gains an HTTPS listener naming a
// Secret that already exists. A proxy that subscribed to the certificate's
// SDS name before the update (the Gateway did not name it: nothing) gets
// it with the update; one that subscribes after gets it at once; both
// SotW and delta. A later change to the Gateway's routes alone (its
// listeners and clusters unchanged) keeps the certificate: a proxy that
// starts after it still gets it, and the delta stream is not told to
// remove it.
func TestSDSListenerAddedToGateway(t *testing.T) {
	name := core.SecretName("a/cert")
	for _, subscribeFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "subscribed before the update", false: "subscribed after the update"}[subscribeFirst], func(t *testing.T) {
			plain, withHTTPS := gatewayGainingHTTPS("a.example.com")
			e := newEnv(t, envOptions{gateways: []model.Gateway{plain}, secrets: []*corev1.Secret{tlsSecretFor(t, "a", "cert", "a.example.com")}})
			// watcher holds the listeners and the route configuration
			// http.80: its next response of a type says that a publish
			// changing that type happened.
			watcher := e.sotw(node("proxy-watcher", "a", "gw"))
			last := map[string]*discoveryv3.DiscoveryResponse{}
			watch := func(typeURL string, names ...string) {
				watcher.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names})
				last[typeURL] = watcher.recv()
				watcher.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names,
					VersionInfo: last[typeURL].VersionInfo, ResponseNonce: last[typeURL].Nonce})
			}
			watch(resourcev3.ListenerType)
			watch(resourcev3.RouteType, "http.80")
			published := func(typeURL string, names ...string) {
				t.Helper()
				r := watcher.recv()
				if r.GetTypeUrl() != typeURL || r.GetVersionInfo() == last[typeURL].GetVersionInfo() {
					t.Fatalf("got %s version %s, want a new %s version", r.GetTypeUrl(), r.GetVersionInfo(), typeURL)
				}
				last[typeURL] = r
				watcher.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
			}

			p := e.sotw(node("proxy", "a", "gw"))
			d := e.delta(node("proxy-delta", "a", "gw"))
			subscribe := func() {
				p.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{name}})
				d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNamesSubscribe: []string{name}})
			}
			if subscribeFirst {
				subscribe()
				r := d.recv() // a first delta request is answered at once
				if len(r.GetResources()) != 0 {
					t.Fatalf("delta proxy got %d secrets before its Gateway named one", len(r.GetResources()))
				}
				d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.SecretType, ResponseNonce: r.Nonce})
				p.quiet("the Gateway names no Secret yet")
			}
			e.gateways.UpdateObject(withHTTPS)
			published(resourcev3.ListenerType)
			if !subscribeFirst {
				subscribe()
			}
			sds := p.recv()
			if got := secretsOf(t, sds); sds.TypeUrl != resourcev3.SecretType || got[name] == nil {
				t.Fatalf("SotW proxy got %s %v, want the secret %s", sds.TypeUrl, slices.Collect(maps.Keys(got)), name)
			}
			p.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{name},
				VersionInfo: sds.VersionInfo, ResponseNonce: sds.Nonce})
			dr := d.recv()
			if len(dr.GetResources()) != 1 || dr.GetResources()[0].GetName() != name {
				t.Fatalf("delta proxy got %d resources, want the secret %s", len(dr.GetResources()), name)
			}
			d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.SecretType, ResponseNonce: dr.Nonce})

			// The route's hostname changes: RDS only.
			_, renamed := gatewayGainingHTTPS("b.example.com")
			e.gateways.UpdateObject(renamed)
			published(resourcev3.RouteType, "http.80")
			late := e.sotw(node("proxy-late", "a", "gw"))
			late.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: []string{name}})
			if got := secretsOf(t, late.recv()); got[name] == nil {
				t.Fatalf("a proxy starting after a route change got secrets %v, want %s", slices.Collect(maps.Keys(got)), name)
			}
			d.quiet("a route change must not remove the certificate")
			p.quiet("a route change must not re-send the certificate")
		})
	}
}
