// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package install_test installs manifests/ as shipped into a real cluster
// (pkg/test/kubeenv) and runs the pilot-discovery binary, built from this
// checkout, as a separate process with the shipped Deployment's arguments
// and a kubeconfig holding only a token of the shipped ServiceAccount
// (least privilege). It checks that those permissions are enough for
// everything pilot-discovery does on the seed scenario (pool status, shadow
// Service, default GatewayClass, leader Lease, TokenReview), that the API
// server refused none of its requests, and that ADS over TLS with
// --xds-auth=serviceaccount serves the seed Gateway's proxy and refuses the
// others (TestADSIdentityBound, xdsauth_test.go, has the refusals in full).
package install_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

const (
	installNamespace = "infermesh-system"
	serviceAccount   = "pilot-discovery"
	pilotUser        = "system:serviceaccount:" + installNamespace + ":" + serviceAccount
	leaseName        = "infermesh-gateway-controller"
	shadowService    = "vllm-llama3-8b-ip-22dc7de1"
	shadowCluster    = "outbound|54321||" + shadowService + ".llm-namespace.svc.cluster.local"
	wait             = time.Minute
)

func TestInstalledPilotDiscovery(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	admin := env.RESTConfig()
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(admin)
	objs := applyManifests(t, admin)
	applySeed(t, kc, admin)

	// pilot-discovery's only credential: a token of its ServiceAccount.
	dir := t.TempDir()
	kubeconfig := dir + "/kubeconfig"
	writeTokenKubeconfig(t, kubeconfig, admin, token(t, kc, installNamespace, serviceAccount))
	checkIdentity(t, kubeconfig)
	certs := newADSTLS(t, dir)

	args, penv := deploymentCommand(t, objs, map[string]string{
		"--ads-address": "127.0.0.1:0", "--http-address": "127.0.0.1:0", "--debug-address": "127.0.0.1:0",
		"--tls-cert-file": certs.certFile, "--tls-key-file": certs.keyFile, "--kubeconfig": kubeconfig,
	})
	p := startPilot(t, buildPilot(t), args, penv)
	poll.UntilOr(t, wait, "pilot-discovery /ready answers 200", func() bool { return httpOK("http://" + p.httpAddr + "/ready") },
		func() string { return fmt.Sprintf("refused requests: %v", refused(t, env)) })

	ic := inferenceclient.NewForConfigOrDie(admin)
	var pool *inferencev1.InferencePool
	poll.UntilOr(t, wait, "the seed InferencePool's status: Accepted and ResolvedRefs True for the seed Gateway", func() bool {
		var err error
		pool, err = ic.InferenceV1().InferencePools(seed.Namespace).Get(ctx, seed.PoolName, metav1.GetOptions{})
		return err == nil && poolAccepted(pool)
	}, func() string { return fmt.Sprintf("%+v; refused requests: %v", pool.Status, refused(t, env)) })

	var svc *corev1.Service
	poll.UntilOr(t, wait, "the shadow Service "+shadowService, func() bool {
		var err error
		svc, err = kc.CoreV1().Services(seed.Namespace).Get(ctx, shadowService, metav1.GetOptions{})
		return err == nil
	}, func() string { return fmt.Sprintf("absent; refused requests: %v", refused(t, env)) })
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Labels["istio.io/inferencepool-name"] != seed.PoolName {
		t.Errorf("shadow Service: clusterIP %q, labels %v; want headless, labelled with the pool", svc.Spec.ClusterIP, svc.Labels)
	}

	// The seed Gateway is deployed: its ServiceAccount, Service, bootstrap
	// ConfigMap and Envoy Deployment, all named gateway-istio.
	poll.UntilOr(t, wait, "the seed Gateway's deployment objects", func() bool {
		gw := seed.GatewayNamespace
		_, errD := kc.AppsV1().Deployments(gw).Get(ctx, "gateway-istio", metav1.GetOptions{})
		_, errS := kc.CoreV1().Services(gw).Get(ctx, "gateway-istio", metav1.GetOptions{})
		_, errA := kc.CoreV1().ServiceAccounts(gw).Get(ctx, "gateway-istio", metav1.GetOptions{})
		_, errC := kc.CoreV1().ConfigMaps(gw).Get(ctx, "gateway-istio-bootstrap", metav1.GetOptions{})
		return errD == nil && errS == nil && errA == nil && errC == nil
	}, func() string { return fmt.Sprintf("refused requests: %v", refused(t, env)) })

	// A proxy of the seed Gateway, with a token of its ServiceAccount
	// (gateway-istio, which pilot-discovery made) for our audience, gets the
	// seed's configuration over TLS.
	conn := adsConn(t, p.ads, certs.caPool)
	gwToken := podToken(t, kc, seed.GatewayNamespace, "gateway-istio", xdsAudience)
	proxy := openProxy(t, conn, "seed-proxy", seedGatewayRef, gwToken, wait)
	cl := proxy.clusters(t, shadowCluster)
	if lb := cl[shadowCluster].GetLoadBalancingPolicy().GetPolicies(); len(lb) == 0 ||
		lb[0].GetTypedExtensionConfig().GetName() != "envoy.load_balancing_policies.override_host" {
		t.Errorf("shadow cluster load balancing policy = %v, want override_host", lb)
	}
	if got, want := proxy.endpoints(t, shadowCluster, 3), []string{"10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000"}; !slices.Equal(got, want) {
		t.Errorf("shadow cluster endpoints = %v, want %v", got, want)
	}

	// No token, and a token of another namespace's ServiceAccount: nothing.
	openProxy(t, conn, "anonymous", seedGatewayRef, "", wait).denied(t, codes.Unauthenticated)
	ensureServiceAccount(t, kc, seed.Namespace, "intruder")
	openProxy(t, conn, "intruder", seedGatewayRef, podToken(t, kc, seed.Namespace, "intruder", xdsAudience), wait).denied(t, codes.PermissionDenied)
	openProxy(t, conn, "forged", seedGatewayRef, gwToken[:len(gwToken)-4]+"AAAA", wait).denied(t, codes.Unauthenticated)

	// The leader has renewed its Lease at least once (a renewal is get +
	// update, which the first acquisition does not exercise).
	poll.UntilOr(t, wait, "the Lease "+installNamespace+"/"+leaseName+" renewed after it was acquired", func() bool {
		l, err := kc.CoordinationV1().Leases(installNamespace).Get(ctx, leaseName, metav1.GetOptions{})
		return err == nil && l.Spec.AcquireTime != nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(l.Spec.AcquireTime.Time)
	}, func() string { return fmt.Sprintf("refused requests: %v", refused(t, env)) })

	checkAudit(t, env)
	checkLogs(t, p)
	if err := p.stop(); err != nil {
		t.Errorf("pilot-discovery after SIGTERM: %v", err)
	}
}

// applySeed creates the seed's namespaces, EPP Service, InferencePool,
// HTTPRoute and Gateway, its three ready model-server pods and its EPP pod.
// The GatewayClass is left to pilot-discovery (the default class it creates).
func applySeed(t *testing.T, kc kubernetes.Interface, cfg *rest.Config) {
	t.Helper()
	ctx := t.Context()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := seed.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	must(kubeenv.CreateReadyPods(ctx, kc, seed.Namespace, "vllm", map[string]string{"app": seed.PoolName}, 8000,
		"10.244.0.13", "10.244.0.14", "10.244.0.15"))
	must(kubeenv.CreateReadyPods(ctx, kc, seed.Namespace, "epp", map[string]string{"app": seed.EPPName}, seed.EPPPort, "10.244.0.16"))
}

// token creates the ServiceAccount ns/name if missing and returns a token
// for it (TokenRequest).
func token(t *testing.T, kc kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := t.Context()
	sas := kc.CoreV1().ServiceAccounts(ns)
	if _, err := sas.Get(ctx, name, metav1.GetOptions{}); err != nil {
		if _, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := sas.CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// checkIdentity checks that the kubeconfig authenticates as pilot-discovery's
// ServiceAccount, and that the shipped rules give it no more than it needs
// for a few things it must not do.
func checkIdentity(t *testing.T, kubeconfig string) {
	t.Helper()
	ctx := t.Context()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)
	ssr, err := kc.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := ssr.Status.UserInfo.Username; u != pilotUser {
		t.Fatalf("the kubeconfig authenticates as %q, want %q", u, pilotUser)
	}
	for _, a := range []authorizationv1.ResourceAttributes{
		// Secrets are listed and watched (HTTPS listeners' certificates),
		// never read one by one nor written.
		{Verb: "get", Resource: "secrets", Namespace: seed.Namespace},
		{Verb: "create", Resource: "secrets", Namespace: seed.Namespace},
		{Verb: "list", Resource: "pods"},
		{Verb: "update", Resource: "services", Namespace: seed.Namespace},
		{Verb: "update", Group: "inference.networking.k8s.io", Resource: "inferencepools", Namespace: seed.Namespace},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: leaseName},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: installNamespace, Name: "another-lease"},
		{Verb: "list", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
	} {
		r, err := kc.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			t.Errorf("pilot-discovery may %s %s/%s %q in %q: more than it needs", a.Verb, a.Group, a.Resource, a.Name, a.Namespace)
		}
	}
}

// poolAccepted reports whether pool has a status entry for the seed Gateway
// with Accepted and ResolvedRefs True.
func poolAccepted(pool *inferencev1.InferencePool) bool {
	for _, p := range pool.Status.Parents {
		if p.ParentRef.Name != seed.GatewayName || string(p.ParentRef.Namespace) != seed.GatewayNamespace {
			continue
		}
		conds := map[string]metav1.ConditionStatus{}
		for _, c := range p.Conditions {
			conds[c.Type] = c.Status
		}
		return conds["Accepted"] == metav1.ConditionTrue && conds["ResolvedRefs"] == metav1.ConditionTrue
	}
	return false
}

// refused lists pilot-discovery's requests that the API server refused
// (403), from the audit log.
func refused(t *testing.T, env *kubeenv.Env) []string {
	t.Helper()
	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events {
		if e.User == pilotUser && e.Stage == "ResponseComplete" && e.Code == http.StatusForbidden {
			out = append(out, fmt.Sprintf("%s %s/%s%s %s/%s", e.Verb, e.APIGroup, e.Resource, sub(e.Subresource), e.Namespace, e.Name))
		}
	}
	return out
}

// checkAudit reads the apiserver's audit log: the API server refused none of
// pilot-discovery's requests, and its writes (pool status, shadow Service,
// default GatewayClass, Lease) were made as its ServiceAccount.
func checkAudit(t *testing.T, env *kubeenv.Env) {
	t.Helper()
	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	wrote := map[string]bool{}
	for _, e := range events {
		if e.User != pilotUser || e.Stage != "ResponseComplete" {
			continue
		}
		if e.Code == http.StatusForbidden {
			t.Errorf("the API server refused pilot-discovery: %s %s/%s%s %s/%s (%s)",
				e.Verb, e.APIGroup, e.Resource, sub(e.Subresource), e.Namespace, e.Name, e.RequestURI)
		}
		if e.IsWrite() && e.Code < 300 {
			wrote[e.Verb+" "+e.Resource+sub(e.Subresource)] = true
		}
	}
	for _, w := range []string{"create services", "update inferencepools/status", "create gatewayclasses",
		"patch gatewayclasses/status", "patch gateways/status", "update httproutes/status",
		"create leases", "update leases", "create tokenreviews"} {
		if !wrote[w] {
			t.Errorf("no successful %q by %s in the audit log; writes seen: %v", w, pilotUser, keys(wrote))
		}
	}
}

func sub(s string) string {
	if s == "" {
		return ""
	}
	return "/" + s
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkLogs fails on any log line of pilot-discovery that reports an RBAC
// refusal.
func checkLogs(t *testing.T, p *pilotProcess) {
	t.Helper()
	for _, l := range p.logLines(t) {
		line := strings.ToLower(fmt.Sprint(l))
		if strings.Contains(line, "forbidden") || strings.Contains(line, "cannot list") || strings.Contains(line, "cannot watch") {
			t.Errorf("pilot-discovery logged a refusal: %v", l)
		}
	}
}

func httpOK(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
