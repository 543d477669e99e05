// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package install_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
	"github.com/infermesh/infermesh/pkg/test/certs"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// xdsAudience is the audience pilot-discovery's TokenReview asks for by
// default, and the Gateway Deployments' projected tokens carry.
const xdsAudience = "infermesh"

// TestADSIdentityBound (identity-bound ADS and SDS) runs the shipped
// install as TestInstalledPilotDiscovery does, with --xds-auth-recheck=1s,
// beside the seed Gateway a second Gateway "second" of the same namespace
// with an HTTPS listener whose certificate is the Secret "second-cert".
// Tokens are minted with the TokenRequest API bound to a Pod of the
// ServiceAccount, as the kubelet mints a pod's projected token.
//
//   - The seed Gateway's own ServiceAccount (gateway-istio, made by
//     pilot-discovery), token for our audience: served.
//   - Another ServiceAccount of the namespace, and its default one, with
//     our audience: PermissionDenied. The default ServiceAccount's token as
//     every pod mounts it (the API server's audience), and the Gateway's own
//     ServiceAccount's with that audience: Unauthenticated.
//   - SDS: the seed Gateway's token naming Gateway second is refused; the
//     seed's own proxy subscribing to second's certificate gets nothing;
//     second's own proxy gets it.
//   - second's ServiceAccount deleted: its open stream ends, Unauthenticated,
//     at a re-check (bounded by the re-check interval plus the API server's
//     10 s token cache), and the log names the Gateway and ServiceAccount.
func TestADSIdentityBound(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	admin := env.RESTConfig()
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(admin)
	objs := applyManifests(t, admin)
	applySeed(t, kc, admin)
	ns := seed.GatewayNamespace
	secondCert := createSecondGateway(t, kc, admin)

	dir := t.TempDir()
	kubeconfig := dir + "/kubeconfig"
	writeTokenKubeconfig(t, kubeconfig, admin, token(t, kc, installNamespace, serviceAccount))
	certs := newADSTLS(t, dir)
	args, penv := deploymentCommand(t, objs, map[string]string{
		"--ads-address": "127.0.0.1:0", "--http-address": "127.0.0.1:0", "--debug-address": "127.0.0.1:0",
		"--tls-cert-file": certs.certFile, "--tls-key-file": certs.keyFile, "--kubeconfig": kubeconfig,
		"--xds-auth-recheck": "1s",
	})
	p := startPilot(t, buildPilot(t), args, penv)
	poll.UntilOr(t, wait, "pilot-discovery /ready answers 200", func() bool { return httpOK("http://" + p.httpAddr + "/ready") },
		func() string { return fmt.Sprintf("refused requests: %v", refused(t, env)) })
	// The Gateways' ServiceAccounts are pilot-discovery's to make.
	for _, sa := range []string{"gateway-istio", "second-istio"} {
		poll.UntilOr(t, wait, "ServiceAccount "+ns+"/"+sa, func() bool {
			_, err := kc.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{})
			return err == nil
		}, func() string { return fmt.Sprintf("refused requests: %v", refused(t, env)) })
	}
	ensureServiceAccount(t, kc, ns, "other")
	poll.Until(t, wait, "ServiceAccount "+ns+"/default (service-account controller)", func() bool {
		_, err := kc.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})

	own := podToken(t, kc, ns, "gateway-istio", xdsAudience)
	conn := adsConn(t, p.ads, certs.caPool)
	seedGW, secondGW := gatewayRef{ns, seed.GatewayName}, gatewayRef{ns, "second"}

	// Each rule is a subtest, so that a binary that breaks one shows every
	// case it breaks. Streams that outlive a subtest are opened on t.
	seedProxy := openProxy(t, conn, "seed-proxy", seedGW, own, 5*wait)
	seedServed := t.Run("the Gateway's own ServiceAccount, our audience: served", func(t *testing.T) {
		seedProxy.clusters(t, shadowCluster)
	})

	for _, tc := range []struct {
		name  string
		token string
		gw    gatewayRef
		code  codes.Code
		msg   string
	}{
		{"another ServiceAccount of the Gateway's namespace, our audience", podToken(t, kc, ns, "other", xdsAudience), seedGW,
			codes.PermissionDenied, "served only to its own ServiceAccount gateway-namespace/gateway-istio, not to gateway-namespace/other"},
		{"the namespace's default ServiceAccount, our audience", podToken(t, kc, ns, "default", xdsAudience), seedGW,
			codes.PermissionDenied, "not to gateway-namespace/default"},
		{"the default ServiceAccount's token as a pod mounts it (the API server's audience)", podToken(t, kc, ns, "default"), seedGW,
			codes.Unauthenticated, `audience "infermesh"`},
		{"the Gateway's own ServiceAccount, the API server's audience", podToken(t, kc, ns, "gateway-istio"), seedGW,
			codes.Unauthenticated, `audience "infermesh"`},
		{"the seed Gateway's token naming Gateway second (to read its certificate)", own, secondGW,
			codes.PermissionDenied, "served only to its own ServiceAccount gateway-namespace/second-istio"},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			pr := openProxy(t, conn, "intruder", tc.gw, tc.token, 5*wait)
			pr.request(resource.SecretType, core.SecretName(ns+"/"+secondCert))
			pr.request(resource.ClusterType)
			r, err := pr.Recv(wait)
			if err == nil {
				t.Fatalf("got a %s response with %d resources, want the stream to end with %s", r.GetTypeUrl(), len(r.GetResources()), tc.code)
			}
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("stream ended with %v, want %s containing %q", err, tc.code, tc.msg)
			}
		})
	}

	secondProxy := openProxy(t, conn, "second-proxy", secondGW, podToken(t, kc, ns, "second-istio", xdsAudience), 5*wait)
	secondServed := false
	t.Run("SDS: a proxy never receives a Secret its Gateway does not reference", func(t *testing.T) {
		// second's own proxy gets its certificate: it is published.
		secondProxy.request(resource.SecretType, core.SecretName(ns+"/"+secondCert))
		if got := secondProxy.secrets(t); len(got) != 1 || got[0] != core.SecretName(ns+"/"+secondCert) {
			t.Fatalf("second's proxy got secrets %v, want its certificate", got)
		}
		secondServed = true
		if !seedServed {
			t.Fatal("the seed's own proxy was not served: nothing to ask with")
		}
		// The seed's authorized proxy asks for it by name and gets
		// nothing: an answer would come before the listeners it asks for
		// next.
		seedProxy.request(resource.SecretType, core.SecretName(ns+"/"+secondCert))
		seedProxy.request(resource.ListenerType)
		for {
			r := seedProxy.next(t, "")
			if r.GetTypeUrl() == resource.SecretType && len(r.GetResources()) > 0 {
				t.Fatalf("the seed Gateway's proxy got %d secrets, asking only for %s, which only Gateway second references",
					len(r.GetResources()), secondCert)
			}
			if r.GetTypeUrl() == resource.ListenerType {
				break
			}
		}
	})

	t.Run("a deleted ServiceAccount's open stream ends at a re-check", func(t *testing.T) {
		if !secondServed {
			t.Fatal("second's proxy was never served: no open stream to end")
		}
		deleted := time.Now()
		if err := kc.CoreV1().ServiceAccounts(ns).Delete(ctx, "second-istio", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Responses, were there any, are read past until the stream ends.
		var err error
		for end := time.Now().Add(wait); err == nil; {
			_, err = secondProxy.Recv(time.Until(end))
		}
		if errors.Is(err, adsclient.ErrNoResponse) {
			t.Fatalf("second's stream still open %s after its ServiceAccount was deleted", wait)
		}
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "token not accepted") {
			t.Errorf("second's stream ended with %v, want Unauthenticated: token not accepted", err)
		}
		t.Logf("second's stream ended %s after its ServiceAccount was deleted (re-check 1s; the API server caches a token's success for up to 10s)",
			time.Since(deleted).Round(100*time.Millisecond))
		poll.UntilOr(t, wait, "the log line naming Gateway second and its ServiceAccount", func() bool {
			for _, l := range p.logLines(t) {
				if l["msg"] == "xds auth: ending an ADS stream: its identity is no longer authorized" &&
					l["gateway"] == ns+"/second" && l["serviceAccount"] == ns+"/second-istio" {
					return true
				}
			}
			return false
		}, func() string { return p.log(t) })
		// The seed's stream is untouched by the re-checks.
		if seedServed {
			seedProxy.request(resource.ClusterType)
			if r, err := seedProxy.Recv(wait); err != nil || r.GetTypeUrl() != resource.ClusterType {
				t.Errorf("the seed's stream after the re-checks: %v, %v", r.GetTypeUrl(), err)
			}
		}
	})
	for _, l := range p.logLines(t) {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "ADS serves without proxy authorization") {
			t.Errorf("warned of no authorization with --xds-auth=serviceaccount: %v", l)
		}
	}
	checkAudit(t, env)
}

// createSecondGateway creates Gateway "second" in the seed Gateway's
// namespace with an HTTPS listener on 443 whose certificate is a new TLS
// Secret, and a route to it (a redirect, so no backend is needed). It
// returns the Secret's name.
func createSecondGateway(t *testing.T, kc kubernetes.Interface, admin *rest.Config) string {
	t.Helper()
	ctx := t.Context()
	ns := seed.GatewayNamespace
	gc := gatewayclient.NewForConfigOrDie(admin)
	crt, key, err := certs.SelfSignedFor("second.example.com", nil, []string{"second.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second-cert"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{}))
	must(gc.GatewayV1().Gateways(ns).Create(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: seed.GatewayClass,
		Listeners: []gwv1.Listener{{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname("second.example.com")),
			TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "second-cert"}}}}},
	}}, metav1.CreateOptions{}))
	must(gc.GatewayV1().HTTPRoutes(ns).Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second-redirect"},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "second"}}},
			Rules: []gwv1.HTTPRouteRule{{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
				RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Hostname: ptr.To(gwv1.PreciseHostname("elsewhere.example.com")), StatusCode: ptr.To(302)}}}}},
		}}, metav1.CreateOptions{}))
	return "second-cert"
}

// ensureServiceAccount creates ServiceAccount ns/name if missing.
func ensureServiceAccount(t *testing.T, kc kubernetes.Interface, ns, name string) {
	t.Helper()
	sas := kc.CoreV1().ServiceAccounts(ns)
	if _, err := sas.Get(t.Context(), name, metav1.GetOptions{}); err == nil {
		return
	}
	if _, err := sas.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podToken creates a Pod running as ServiceAccount ns/sa (no kubelet runs
// it) and returns a token for sa bound to that Pod, as the kubelet mints a
// projected token: for audiences, or for the API server's own audience when
// none is given (what every pod mounts).
func podToken(t *testing.T, kc kubernetes.Interface, ns, sa string, audiences ...string) string {
	t.Helper()
	ctx := t.Context()
	pod, err := kc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: sa + "-"},
		Spec:       corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "proxy", Image: "envoy"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: audiences, ExpirationSeconds: new(int64(3600)),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s bound to pod %s: %v", ns, sa, pod.Name, err)
	}
	return tr.Status.Token
}
