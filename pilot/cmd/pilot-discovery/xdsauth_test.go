// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
	"github.com/infermesh/infermesh/pkg/test/logbuf"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

// fakeToken is what the fake API server knows of a token.
type fakeToken struct {
	user      string
	audiences []string
	// ignoresAudiences: the review answers with no status.audiences, as an
	// API server that does not check them would.
	ignoresAudiences bool
}

// fakeAPI answers TokenReviews as the API server does: a known token
// authenticates as its user when the review asks for one of its
// audiences (or for none: then the API server's own, "api"), with the
// audiences it matched; "api-down" (or any token while down is set) fails
// the call; anything else is not authenticated. Tokens can be revoked
// (their ServiceAccount deleted).
type fakeAPI struct {
	mu      sync.Mutex
	tokens  map[string]fakeToken
	down    bool
	reviews int
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{tokens: map[string]fakeToken{
		"gw-token":      {user: "system:serviceaccount:gateway-namespace:gateway-istio", audiences: []string{"infermesh"}},
		"default-token": {user: "system:serviceaccount:gateway-namespace:default", audiences: []string{"infermesh"}},
		"other-token":   {user: "system:serviceaccount:other-ns:gateway-istio", audiences: []string{"infermesh"}},
		"pod-token":     {user: "system:serviceaccount:gateway-namespace:gateway-istio", audiences: []string{"api"}},
		"lax-token":     {user: "system:serviceaccount:gateway-namespace:gateway-istio", audiences: []string{"infermesh"}, ignoresAudiences: true},
		"user-token":    {user: "alice", audiences: []string{"infermesh"}},
	}}
}

func (f *fakeAPI) revoke(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tokens, token)
}

func (f *fakeAPI) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeAPI) reviewCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reviews
}

func (f *fakeAPI) authenticator(gws gatewayIdentities, log *slog.Logger) *saAuthenticator {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.reviews++
		if tr.Spec.Token == "api-down" || f.down {
			return true, nil, errors.New("connection refused")
		}
		tok, ok := f.tokens[tr.Spec.Token]
		want := tr.Spec.Audiences
		if len(want) == 0 {
			want = []string{"api"}
		}
		var matched []string
		for _, a := range want {
			if slices.Contains(tok.audiences, a) {
				matched = append(matched, a)
			}
		}
		switch {
		case !ok:
			tr.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		case len(matched) == 0:
			tr.Status = authnv1.TokenReviewStatus{Error: "token audiences are invalid for the target audiences"}
		case tok.ignoresAudiences:
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: tok.user}}
		default:
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: tok.user}, Audiences: matched}
		}
		return true, tr, nil
	})
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &saAuthenticator{reviews: cs.AuthenticationV1().TokenReviews(), audience: "infermesh", timeout: 5 * time.Second,
		recheck: time.Hour, gateways: gws, log: log}
}

// fakeGateways maps Gateway keys to their ServiceAccount names; a key
// absent is not ours. synced false answers "not read yet" for absent keys.
type fakeGateways struct {
	mu     sync.Mutex
	sas    map[string]string
	synced bool
}

func seedGateways() *fakeGateways {
	return &fakeGateways{sas: map[string]string{seedGateway: "gateway-istio", "gateway-namespace/second": "second-istio"}, synced: true}
}

func (g *fakeGateways) ProxyServiceAccount(ns, name string) (string, bool, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sa, ok := g.sas[ns+"/"+name]
	return sa, ok, ok || g.synced
}

func (g *fakeGateways) set(key, sa string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sa == "" {
		delete(g.sas, key)
		return
	}
	g.sas[key] = sa
}

// adsWait bounds each ADS receive and each stream of these tests.
const adsWait = 30 * time.Second

// openDelta opens a delta ADS stream for a proxy of gw with token ("" sends
// none) on a plaintext connection to addr; the stream ends with the test.
func openDelta(t *testing.T, addr string, gw gatewayRef, token string, opts ...adsclient.DialOption) *adsclient.Delta {
	t.Helper()
	return adsclient.NewDelta(t, adsclient.Dial(t, addr, opts...), proxyNode(gw), adsclient.Token(token), adsclient.Within(adsWait))
}

// TestXDSAuthServiceAccount: only a token of the Gateway's own
// ServiceAccount, issued for our audience, gets configuration.
func TestXDSAuthServiceAccount(t *testing.T) {
	gws := seedGateways()
	e := startXDS(t, grpc.ChainStreamInterceptor(newFakeAPI().authenticator(gws, nil).streamInterceptor()))
	seed := gatewayRef{"gateway-namespace", "gateway"}
	cases := []struct {
		name  string
		token string // "" sends no authorization
		gw    gatewayRef
		want  codes.Code
		msg   string
	}{
		{"the Gateway's own ServiceAccount", "gw-token", seed, codes.OK, ""},
		{"no token", "", seed, codes.Unauthenticated, "authorization"},
		{"rejected token", "forged", seed, codes.Unauthenticated, "invalid bearer token"},
		{"token for the API server's audience (a pod's mounted token)", "pod-token", seed, codes.Unauthenticated, `audience "infermesh"`},
		{"API server that does not confirm the audience", "lax-token", seed, codes.Unauthenticated, "did not confirm"},
		{"not a service account", "user-token", seed, codes.PermissionDenied, "not a ServiceAccount"},
		{"default ServiceAccount of the Gateway's namespace", "default-token", seed, codes.PermissionDenied,
			"served only to its own ServiceAccount gateway-namespace/gateway-istio, not to gateway-namespace/default"},
		{"the Gateway's ServiceAccount reading another Gateway of its namespace", "gw-token", gatewayRef{"gateway-namespace", "second"},
			codes.PermissionDenied, "served only to its own ServiceAccount gateway-namespace/second-istio"},
		{"a ServiceAccount of that name in another namespace", "other-token", seed, codes.PermissionDenied, "may not read Gateway"},
		{"a Gateway that is not ours", "gw-token", gatewayRef{"gateway-namespace", "missing"}, codes.PermissionDenied, "not one of ours"},
		{"TokenReview fails", "api-down", seed, codes.Unavailable, "TokenReview failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openDelta(t, e.ads, tc.gw, tc.token)
			_ = s.Subscribe(resourcev3.ClusterType)
			resp, err := s.Recv(adsWait)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code = %s (%v), want %s", got, err, tc.want)
			}
			if tc.want == codes.OK && len(resp.GetResources()) != 2 {
				t.Errorf("got %d clusters, want 2", len(resp.GetResources()))
			}
			if !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Errorf("message %q lacks %q", status.Convert(err).Message(), tc.msg)
			}
		})
	}
}

// TestXDSAuthOneGatewayPerStream: a stream authorized for its Gateway
// cannot name another one later (go-control-plane takes the node of any
// request that carries one), and a node naming no Gateway is refused.
func TestXDSAuthOneGatewayPerStream(t *testing.T) {
	e := startXDS(t, grpc.ChainStreamInterceptor(newFakeAPI().authenticator(seedGateways(), nil).streamInterceptor()))
	s := openDelta(t, e.ads, gatewayRef{"gateway-namespace", "gateway"}, "gw-token")
	_ = s.Subscribe(resourcev3.ClusterType)
	r, err := s.Recv(adsWait)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.ACK(r)
	_ = s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ListenerType, Node: proxyNode(gatewayRef{"gateway-namespace", "second"})})
	for range 100 { // the responses, if any, before the stream ends
		if _, err = s.Recv(adsWait); err != nil {
			break
		}
	}
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "a later request names Gateway gateway-namespace/second") {
		t.Errorf("switching Gateways: %v, want PermissionDenied naming both", err)
	}

	node := proxyNode(gatewayRef{"gateway-namespace", "gateway"})
	node.Metadata = nil
	s = adsclient.NewDelta(t, adsclient.Dial(t, e.ads), node, adsclient.Token("gw-token"), adsclient.Within(adsWait))
	_ = s.Subscribe(resourcev3.ClusterType)
	if _, err := s.Recv(adsWait); status.Code(err) != codes.InvalidArgument {
		t.Errorf("node without Gateway metadata: %v, want InvalidArgument", err)
	}
}

// TestXDSAuthNotSynced: before the Gateways are read, a proxy is told to
// come back (Unavailable), not refused for good.
func TestXDSAuthNotSynced(t *testing.T) {
	gws := &fakeGateways{sas: map[string]string{}}
	e := startXDS(t, grpc.ChainStreamInterceptor(newFakeAPI().authenticator(gws, nil).streamInterceptor()))
	s := openDelta(t, e.ads, gatewayRef{"gateway-namespace", "gateway"}, "gw-token")
	_ = s.Subscribe(resourcev3.ClusterType)
	if _, err := s.Recv(adsWait); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "not all read yet") {
		t.Errorf("got %v, want Unavailable: not all read yet", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestXDSAuthRecheck: an open stream, idle and waiting for the proxy's next
// request, ends at the next check once its token is no longer accepted
// (its ServiceAccount deleted) or its Gateway wants another ServiceAccount,
// with the status and a log line naming the Gateway and the
// ServiceAccount. A check that cannot reach the API server keeps the
// stream, logged.
func TestXDSAuthRecheck(t *testing.T) {
	cases := []struct {
		name    string
		change  func(api *fakeAPI, gws *fakeGateways)
		code    codes.Code
		message string
	}{
		{"ServiceAccount deleted", func(api *fakeAPI, _ *fakeGateways) { api.revoke("gw-token") },
			codes.Unauthenticated, "invalid bearer token"},
		{"Gateway moved to another class", func(_ *fakeAPI, gws *fakeGateways) { gws.set(seedGateway, "gateway-other") },
			codes.PermissionDenied, "served only to its own ServiceAccount gateway-namespace/gateway-other"},
		{"Gateway deleted", func(_ *fakeAPI, gws *fakeGateways) { gws.set(seedGateway, "") },
			codes.PermissionDenied, "not one of ours"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api, gws := newFakeAPI(), seedGateways()
			var logs syncBuffer
			a := api.authenticator(gws, slog.New(slog.NewTextHandler(&logs, nil)))
			a.recheck = 20 * time.Millisecond
			e := startXDS(t, grpc.ChainStreamInterceptor(a.streamInterceptor()))
			s := openDelta(t, e.ads, gatewayRef{"gateway-namespace", "gateway"}, "gw-token")
			_ = s.Subscribe(resourcev3.ClusterType)
			if _, err := s.Recv(adsWait); err != nil {
				t.Fatal(err)
			}
			// Checked again at least twice while nothing changed: the
			// stream stays.
			before := api.reviewCount()
			poll.Until(t, 10*time.Second, "two more TokenReviews", func() bool { return api.reviewCount() >= before+2 })
			if strings.Contains(logs.String(), "ending") {
				t.Fatalf("a stream that still passes was ended: %s", logs.String())
			}
			tc.change(api, gws)
			// The proxy sends nothing more: the server must end the stream
			// on its own.
			_, err := s.Recv(adsWait)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("stream ended with %v, want %s containing %q", err, tc.code, tc.message)
			}
			poll.UntilOr(t, 10*time.Second, "the log line", func() bool {
				l := logs.String()
				return strings.Contains(l, "ending an ADS stream") && strings.Contains(l, "gateway="+seedGateway) &&
					strings.Contains(l, "serviceAccount=gateway-namespace/gateway-istio")
			}, logs.String)
		})
	}

	t.Run("API server unreachable", func(t *testing.T) {
		api := newFakeAPI()
		var logs syncBuffer
		a := api.authenticator(seedGateways(), slog.New(slog.NewTextHandler(&logs, nil)))
		a.recheck = 20 * time.Millisecond
		e := startXDS(t, grpc.ChainStreamInterceptor(a.streamInterceptor()))
		s := openDelta(t, e.ads, gatewayRef{"gateway-namespace", "gateway"}, "gw-token")
		_ = s.Subscribe(resourcev3.ClusterType)
		r, err := s.Recv(adsWait)
		if err != nil {
			t.Fatal(err)
		}
		api.setDown(true)
		poll.UntilOr(t, 10*time.Second, "two failed checks logged", func() bool {
			return strings.Count(logs.String(), "could not check an open ADS stream") >= 2
		}, logs.String)
		api.setDown(false)
		// Still served: a new subscription is answered on the same stream.
		_ = s.ACK(r)
		_ = s.Subscribe(resourcev3.ListenerType)
		if r, err := s.Recv(adsWait); err != nil || r.GetTypeUrl() != resourcev3.ListenerType {
			t.Fatalf("after the API server came back: %v, %v; want the listeners", r.GetTypeUrl(), err)
		}
	})
}

// TestRecheckLogsExpiryAtInfo: a token past its exp claim ends the stream
// as a routine event (the proxy reconnects with the kubelet's rotated
// token), at INFO; any other failure at WARN.
func TestRecheckLogsExpiryAtInfo(t *testing.T) {
	exp := time.Now().Add(-time.Minute).Unix()
	jwt := "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"exp":%d}`, exp)) + ".sig"
	if got := tokenExpiry(jwt); got.Unix() != exp {
		t.Fatalf("tokenExpiry = %v, want %d", got, exp)
	}
	for _, bad := range []string{"", "a.b", "a.!!!.c", "a." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"x"}`)) + ".c"} {
		if got := tokenExpiry(bad); !got.IsZero() {
			t.Errorf("tokenExpiry(%q) = %v, want zero", bad, got)
		}
	}
	api := newFakeAPI()
	api.tokens[jwt] = api.tokens["gw-token"]
	var logs syncBuffer
	a := api.authenticator(seedGateways(), slog.New(slog.NewTextHandler(&logs, nil)))
	a.recheck = 20 * time.Millisecond
	e := startXDS(t, grpc.ChainStreamInterceptor(a.streamInterceptor()))
	s := openDelta(t, e.ads, gatewayRef{"gateway-namespace", "gateway"}, jwt)
	_ = s.Subscribe(resourcev3.ClusterType)
	if _, err := s.Recv(adsWait); err != nil {
		t.Fatal(err)
	}
	api.revoke(jwt)
	if _, err := s.Recv(adsWait); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("got %v, want Unauthenticated", err)
	}
	poll.UntilOr(t, 10*time.Second, "the INFO line", func() bool {
		return strings.Contains(logs.String(), `level=INFO msg="xds auth: ending an ADS stream: its token expired"`)
	}, logs.String)
}

func TestServiceAccountOf(t *testing.T) {
	for user, want := range map[string][2]string{
		"system:serviceaccount:ns:sa":   {"ns", "sa"},
		"system:serviceaccount:ns":      {},
		"system:serviceaccount::sa":     {},
		"system:serviceaccount:ns:sa:x": {},
		"system:node:worker":            {},
	} {
		ns, name, ok := serviceAccountOf(user)
		if ok != (want[0] != "") || ns != want[0] || name != want[1] {
			t.Errorf("serviceAccountOf(%q) = %q, %q, %v", user, ns, name, ok)
		}
	}
}

func TestJitterStaysWithinATenth(t *testing.T) {
	for range 1000 {
		if d := jitter(time.Minute); d < 54*time.Second || d > 66*time.Second {
			t.Fatalf("jitter(1m) = %s, want 54s to 66s", d)
		}
	}
}

// TestProxyConfigWithToken: proxy-config --token-file against a TLS server
// that authorizes proxies.
func TestProxyConfigWithToken(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	creds, err := serverCredentials(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	e := startXDS(t, grpc.Creds(creds), grpc.ChainStreamInterceptor(newFakeAPI().authenticator(seedGateways(), nil).streamInterceptor()))
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("gw-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := pc(t, e.ads, "clusters", "--ca-file", cert, "--token-file", tok)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(seedClustersFromServer, out); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	_, err = pc(t, e.ads, "clusters", "--ca-file", cert)
	wantErr(t, err, "Unauthenticated", "authorization")
}

// TestDiscoveryXDSAuthAudienceFlag: the discovery command with
// --xds-auth=serviceaccount over a (fake) cluster: --xds-auth-audience is
// what the TokenReview asks for and what the Gateway Deployment's
// projected token carries, a proxy with the Gateway's own token is served,
// and no warning says ADS is unauthorized.
func TestDiscoveryXDSAuthAudienceFlag(t *testing.T) {
	const audience = "https://xds.example.com"
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "istio"}, Spec: gwv1.GatewayClassSpec{ControllerName: "istio.io/gateway-controller"}}
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "gateway-namespace", Name: "gateway"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: "istio", Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
	}}
	client := kube.NewFake(append(kube.OptionalCRDs(), class, gw)...)
	var mu sync.Mutex
	var asked [][]string
	client.Kube().(*fake.Clientset).PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		mu.Lock()
		asked = append(asked, tr.Spec.Audiences)
		mu.Unlock()
		if tr.Spec.Token == "gw-token" && slices.Equal(tr.Spec.Audiences, []string{audience}) {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences,
				User: authnv1.UserInfo{Username: "system:serviceaccount:gateway-namespace:gateway-istio"}}
		}
		return true, tr, nil
	})
	logs := &logbuf.Buffer{}
	d := fakeDeps(t, "KUBERNETES_SERVICE_HOST", "10.0.0.1", "POD_NAMESPACE", "infermesh-system")
	d.newClient = func(clusterSource, ...kube.Option) (*kube.Client, error) { return client, nil }
	d.stderr = logs
	ads := startDiscovery(t, d, "discovery", "--tls-cert-file", cert, "--tls-key-file", key, "--xds-auth", "serviceaccount",
		"--xds-auth-audience", audience, "--ads-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--debug-address", "").ADS

	var dep *appsv1.Deployment
	poll.UntilOr(t, 30*time.Second, "the Gateway's Deployment", func() bool {
		var err error
		dep, err = client.Kube().AppsV1().Deployments("gateway-namespace").Get(t.Context(), "gateway-istio", metav1.GetOptions{})
		return err == nil
	}, logs.String)
	var audiences []string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		for _, src := range projectedSources(v) {
			if src.ServiceAccountToken != nil {
				audiences = append(audiences, src.ServiceAccountToken.Audience)
			}
		}
	}
	if !slices.Equal(audiences, []string{audience}) {
		t.Errorf("projected token audiences %q, want [%s]", audiences, audience)
	}

	pem, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	s := openDelta(t, ads.String(), gatewayRef{"gateway-namespace", "gateway"}, "gw-token", adsclient.TLS(roots, ""))
	_ = s.Subscribe(resourcev3.ClusterType)
	if _, err := s.Recv(adsWait); err != nil {
		t.Fatalf("the Gateway's own token: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 || !slices.Equal(asked[0], []string{audience}) {
		t.Errorf("TokenReviews asked for %q, want [%s]", asked, audience)
	}
	if strings.Contains(logs.String(), "without proxy authorization") {
		t.Errorf("warned of no authorization with --xds-auth=serviceaccount:\n%s", logs.String())
	}
}

func projectedSources(v corev1.Volume) []corev1.VolumeProjection {
	if v.Projected == nil {
		return nil
	}
	return v.Projected.Sources
}

// recvOnly is a server stream whose every receive succeeds without
// filling the message.
type recvOnly struct{ grpc.ServerStream }

func (recvOnly) RecvMsg(any) error { return nil }

// TestAuthorizedStreamRefusesNonXDSMessages: a message that names no node
// is not an xDS request and is refused rather than let through.
func TestAuthorizedStreamRefusesNonXDSMessages(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &authorizedStream{ServerStream: recvOnly{}, ctx: ctx, cancel: cancel, revoked: make(chan struct{}),
		a: &saAuthenticator{log: slog.New(slog.DiscardHandler)}}
	if err := s.RecvMsg(&authnv1.TokenReview{}); err != io.EOF {
		t.Fatalf("RecvMsg = %v, want io.EOF", err)
	}
	if err := s.deniedErr(); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "not an xDS request") {
		t.Errorf("denial %v, want PermissionDenied: not an xDS request", err)
	}
	if ctx.Err() == nil {
		t.Error("the stream's context was not cancelled")
	}
}
