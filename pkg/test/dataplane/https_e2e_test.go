// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/certs"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

const httpsHost = "secure.example.com"

// httpsObjects are a Gateway (the bootstrap's gateway-namespace/gateway)
// with one HTTPS listener for httpsHost whose certificate is the Secret
// certs/site (allowed by a ReferenceGrant), and an HTTPRoute to the
// Service echo:8080.
func httpsObjects() (*gwv1.Gateway, *gwv1.HTTPRoute, *corev1.Service, *gwv1.ReferenceGrant) {
	gw := seed.Gateway()
	gw.Spec.Listeners = []gwv1.Listener{{
		Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname(httpsHost)),
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Namespace: ptr.To(gwv1.Namespace("certs")), Name: "site"}}},
	}}
	route := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: "web"},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(gw.Name)}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "echo", Port: ptr.To(gwv1.PortNumber(8080))}}}}}},
		},
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: "echo"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}}
	grant := &gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "gateways"}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: gwv1.Namespace(gw.Namespace)}},
		To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}},
	}}
	return gw, route, svc, grant
}

func siteSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	crt, key, err := certs.SelfSignedFor(httpsHost, nil, []string{httpsHost})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "site"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": crt, "tls.key": key}}
}

// httpsClient trusts only the certificate of secret and sends httpsHost's
// requests to addr with server name sni.
func httpsClient(t *testing.T, secret *corev1.Secret, sni string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["tls.crt"]) {
		t.Fatal("no certificate")
	}
	return &tls.Config{RootCAs: pool, ServerName: sni, NextProtos: []string{"h2", "http/1.1"}}
}

// TestEndToEndHTTPS drives an HTTPS Gateway through the whole path: the
// controller (gateway.Build: the listener's cross-namespace certificateRef
// allowed by a ReferenceGrant), the translator and the ADS server (LDS with
// one filter chain for the listener's hostname, SDS on the same stream),
// and the data plane, over real TLS on loopback: the right SNI gets the
// Secret's certificate (verified by the client) and the route's backend;
// another SNI is refused at the handshake. Then the Secret is rotated: the
// data plane gets the new certificate with no new listener (LDS version
// unchanged), new handshakes verify against the new certificate only, and
// a connection opened before the rotation keeps answering.
func TestEndToEndHTTPS(t *testing.T) {
	for _, delta := range []bool{false, true} {
		name := "sotw"
		if delta {
			name = "delta"
		}
		t.Run(name, func(t *testing.T) { testEndToEndHTTPS(t, delta) })
	}
}

func testEndToEndHTTPS(t *testing.T, delta bool) {
	ctx := testCtx(t)
	stop := krt.WithStop(t.Context().Done())
	gw, route, svc, grant := httpsObjects()
	secret := siteSecret(t)
	secrets := krt.NewStaticCollection(nil, []*corev1.Secret{secret}, stop)
	ctrl := gateway.Build(gateway.Inputs{
		GatewayClasses:  krt.NewStaticCollection(nil, []*gwv1.GatewayClass{seed.GatewayClassObject()}, stop),
		Gateways:        krt.NewStaticCollection(nil, []*gwv1.Gateway{gw}, stop),
		HTTPRoutes:      krt.NewStaticCollection(nil, []*gwv1.HTTPRoute{route}, stop),
		ReferenceGrants: krt.NewStaticCollection(nil, []*gwv1.ReferenceGrant{grant}, stop),
		Namespaces:      krt.NewStaticCollection[*corev1.Namespace](nil, nil, stop),
		Services:        krt.NewStaticCollection(nil, []*corev1.Service{svc}, stop),
		Secrets:         secrets,
	}, gateway.Options{ControllerName: string(seed.GatewayClassObject().Spec.ControllerName), ClusterDomain: "cluster.local",
		Krt: []krt.CollectionOption{stop}})

	echo := backend(t, "echo")
	const echoAddr = "10.244.60.10:8080"
	eps := krt.NewStaticCollection(nil, []model.ClusterEndpoints{{
		Cluster: core.ClusterName(8080, "echo."+gw.Namespace+".svc.cluster.local"), Endpoints: []model.Endpoint{{Address: "10.244.60.10", Port: 8080}},
	}}, stop)
	srv, err := xds.NewServer(xds.Config{
		Gateways: ctrl.Translator, Endpoints: eps, Secrets: secrets,
		Debounce: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(runCtx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("xds Run: %v", err)
		}
	})

	dp := runDP(t, testBootstrap(t, lis.Addr().String(), delta), map[string]string{echoAddr: echo.Listener.Addr().String()}, Options{})
	if err := dp.WaitFor(ctx, func(s Snapshot) bool { return s.Listeners[core.ListenerName(443)] != nil }); err != nil {
		t.Fatalf("HTTPS listener never served: %v (last NACK %+v)", err, dp.Snapshot().LastNACK)
	}
	addr := dp.Addr(443).String()

	get := func(cfg *tls.Config) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("https://" + httpsHost + "/hello")
		if err != nil {
			return nil, err
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	resp, err := get(httpsClient(t, secret, httpsHost))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("x-backend") != "echo" || resp.Proto != "HTTP/2.0" {
		t.Fatalf("GET https://%s/hello = %d %s from %q, want 200 HTTP/2.0 from echo", httpsHost, resp.StatusCode, resp.Proto, resp.Header.Get("x-backend"))
	}
	if _, err := get(httpsClient(t, secret, "other.example.com")); err == nil {
		t.Fatal("a server name no listener has was served")
	}

	// A connection opened before the rotation, HTTP/1.1 keep-alive.
	old, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: httpsClient(t, secret, httpsHost).RootCAs, ServerName: httpsHost, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldReader := bufio.NewReader(old)
	onOld := func() (int, error) {
		if _, err := old.Write([]byte("GET /again HTTP/1.1\r\nHost: " + httpsHost + "\r\n\r\n")); err != nil {
			return 0, err
		}
		r, err := http.ReadResponse(oldReader, nil)
		if err != nil {
			return 0, err
		}
		_, _ = io.ReadAll(r.Body)
		r.Body.Close()
		return r.StatusCode, nil
	}
	if code, err := onOld(); err != nil || code != http.StatusOK {
		t.Fatalf("status %d, %v", code, err)
	}

	// Requests go on on the open connection, one after another, through
	// the whole rotation: none may fail.
	ldsVersion := dp.Snapshot().Versions[resourcev3.ListenerType]
	rotated := siteSecret(t)
	stopLoad := make(chan struct{})
	type loadResult struct {
		n      int
		failed []string
	}
	loadDone := make(chan loadResult, 1)
	go func() {
		var res loadResult
		for {
			select {
			case <-stopLoad:
				loadDone <- res
				return
			default:
			}
			code, err := onOld()
			res.n++
			if err != nil || code != http.StatusOK {
				res.failed = append(res.failed, fmt.Sprintf("%d %v", code, err))
				if err != nil {
					loadDone <- res
					return
				}
			}
		}
	}()
	secrets.UpdateObject(rotated)
	name := core.SecretName("certs/site")
	if err := dp.WaitFor(ctx, func(s Snapshot) bool {
		sec := s.Secrets[name]
		return sec != nil && string(sec.GetTlsCertificate().GetCertificateChain().GetInlineBytes()) == string(rotated.Data["tls.crt"])
	}); err != nil {
		t.Fatalf("the rotated certificate never reached the data plane: %v", err)
	}
	if v := dp.Snapshot().Versions[resourcev3.ListenerType]; v != ldsVersion {
		t.Errorf("the rotation re-sent the listeners: LDS version %s -> %s", ldsVersion, v)
	}
	if dp.Addr(443).String() != addr {
		t.Error("the listener was rebound")
	}
	if resp, err := get(httpsClient(t, rotated, httpsHost)); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after the rotation, verifying against the new certificate: %v %v", resp, err)
	}
	if _, err := get(httpsClient(t, secret, httpsHost)); err == nil {
		t.Error("after the rotation a new handshake still verifies against the old certificate only")
	}
	close(stopLoad)
	if res := <-loadDone; len(res.failed) > 0 || res.n == 0 {
		t.Errorf("the connection opened before the rotation: %d of %d requests failed during it: %v", len(res.failed), res.n, res.failed)
	} else {
		t.Logf("%d requests on the open connection during the rotation, none failed", res.n)
	}
	if n := dp.Counters().NACKs; n != 0 {
		t.Errorf("%d NACKs: %+v", n, dp.Snapshot().LastNACK)
	}
}
