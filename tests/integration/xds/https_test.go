// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package xds_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
	"github.com/infermesh/infermesh/pkg/test/certs"
	"github.com/infermesh/infermesh/pkg/test/controller"
	"github.com/infermesh/infermesh/pkg/test/gwproxy"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// TestHTTPSRotationAndSecretIsolation runs the
// whole pilot-discovery in process against a real API server, and the
// Gateway's proxy from the bootstrap ConfigMap it writes (the test data
// plane, or the Envoy binary ENVOY_BINARY names). Gateway "tls" has an HTTPS
// listener with Secret "cert" and a route answering 302 (a redirect, so no
// backend is needed); Gateway "other" has an HTTP listener and names no
// Secret.
//
//   - Rotation: while one TLS connection sends a request every 10 ms, the
//     Secret's certificate is replaced. A new handshake gets the new
//     certificate (SDS reached the proxy), every request on the open
//     connection is answered, before and after, and the listener is not
//     rebound (no drain).
//   - Isolation: a proxy of Gateway "other" subscribes, on its own delta
//     ADS stream, to the SDS name of "cert" and gets nothing (at most an
//     empty response), while a proxy of "tls" gets it.
func TestHTTPSRotationAndSecretIsolation(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	ctx := t.Context()
	cfg := env.RESTConfig()
	kc, gc := kubernetes.NewForConfigOrDie(cfg), gatewayclient.NewForConfigOrDie(cfg)
	ns := seed.GatewayNamespace
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	secret := func(cn string) *corev1.Secret {
		crt, key, err := certs.SelfSignedFor(cn, nil, []string{"a.example.com"})
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cert"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	}
	must(kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	must(gc.GatewayV1().GatewayClasses().Create(ctx, seed.GatewayClassObject(), metav1.CreateOptions{}))
	must(kc.CoreV1().Secrets(ns).Create(ctx, secret("first"), metav1.CreateOptions{}))
	tlsGW := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: seed.GatewayClass,
		Listeners: []gwv1.Listener{{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname("a.example.com")),
			TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}},
	}}
	must(gc.GatewayV1().Gateways(ns).Create(ctx, tlsGW, metav1.CreateOptions{}))
	other := seed.Gateway()
	other.Name = "other"
	must(gc.GatewayV1().Gateways(ns).Create(ctx, other, metav1.CreateOptions{}))
	must(gc.GatewayV1().HTTPRoutes(ns).Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redirect"},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "tls"}}},
			Rules: []gwv1.HTTPRouteRule{{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
				RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Hostname: ptr.To(gwv1.PreciseHostname("b.example.com")), StatusCode: ptr.To(302)}}}}},
		}}, metav1.CreateOptions{}))

	pilot := controller.StartGatewayPilot(t, cfg, "https-rotation-test")
	name := gateway.BootstrapConfigMapName("tls", seed.GatewayClass)
	var boot string
	poll.Until(t, wait, "the bootstrap ConfigMap "+name, func() bool {
		cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		boot = cm.Data[gateway.BootstrapKey]
		return boot != ""
	})
	var gw gwproxy.Proxy
	if bin := os.Getenv("ENVOY_BINARY"); bin != "" {
		gw = gwproxy.StartEnvoy(t, bin, []byte(boot), 443, wait)
	} else {
		gw = gwproxy.StartDataPlane(t, []byte(boot), 443, nil, wait)
	}
	addr := gw.Addr()

	handshake := func() *tls.Conn {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "a.example.com", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // the test reads the certificate served
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	servedCN := func(c *tls.Conn) string { return c.ConnectionState().PeerCertificates[0].Subject.CommonName }
	open := handshake()
	defer open.Close()
	if cn := servedCN(open); cn != "first" {
		t.Fatalf("served %q, want the first certificate", cn)
	}

	// Requests on the open connection until stopped, each answered 302.
	var served, failed atomic.Int32
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		br := bufio.NewReader(open)
		for i := 0; i < 3000; i++ { // bounded: 30 s at one request per 10 ms
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := open.Write([]byte("GET / HTTP/1.1\r\nHost: a.example.com\r\n\r\n")); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
				return
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusFound {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, resp.Status)
				continue
			}
			served.Add(1)
		}
	}()
	poll.Until(t, wait, "requests on the open connection", func() bool { return served.Load() >= 5 || failed.Load() > 0 })
	before := served.Load()

	rotated := secret("second")
	must(kc.CoreV1().Secrets(ns).Update(ctx, rotated, metav1.UpdateOptions{}))
	poll.Until(t, wait, "a new handshake with the rotated certificate", func() bool {
		c := handshake()
		defer c.Close()
		return servedCN(c) == "second"
	})
	after := served.Load()
	poll.Until(t, wait, "requests on the open connection after the rotation", func() bool { return served.Load() >= after+5 || failed.Load() > 0 })
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed on the connection opened before the rotation (first: %v)", failed.Load(), firstErr.Load())
	}
	if gw.Addr() != addr {
		t.Errorf("the listener moved from %s to %s: rebound on a certificate rotation", addr, gw.Addr())
	}
	t.Logf("open connection: %d requests before the rotation, %d in all, none failed", before, served.Load())

	// Isolation: the other Gateway's proxy asks for the Secret by name.
	conn := adsclient.Dial(t, pilot.Addr())
	otherProxy := adsclient.NewDelta(t, conn, controller.ProxyNode("other-proxy", ns, "other"))
	must(t, otherProxy.Subscribe(resource.ClusterType))
	must(t, otherProxy.ACK(recv(t, otherProxy)))
	must(t, otherProxy.Subscribe(resource.SecretType, core.SecretName(ns+"/cert")))
	// Nothing for 2 s: no response, or responses without the Secret (the
	// server may answer the new subscription with an empty one).
	for deadline := time.Now().Add(2 * time.Second); ; {
		r, err := otherProxy.Recv(time.Until(deadline))
		if errors.Is(err, adsclient.ErrNoResponse) {
			break
		}
		if err != nil {
			t.Fatalf("the other proxy's stream ended: %v", err)
		}
		if n := len(r.GetResources()); n != 0 {
			t.Fatalf("a proxy of Gateway other asked for tls's certificate and got %d resources (first %s)", n, r.GetResources()[0].GetName())
		}
		must(t, otherProxy.ACK(r))
	}
	// The Gateway that names it does get it on the same server.
	tlsProxy := adsclient.NewDelta(t, conn, controller.ProxyNode("tls-proxy", ns, "tls"))
	must(t, tlsProxy.Subscribe(resource.SecretType, core.SecretName(ns+"/cert")))
	r := recv(t, tlsProxy)
	if len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != core.SecretName(ns+"/cert") {
		t.Errorf("the proxy of Gateway tls got %d secrets, want its certificate", len(r.GetResources()))
	}
}
