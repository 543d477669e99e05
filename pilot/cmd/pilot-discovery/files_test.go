// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/test/certs"
	"github.com/infermesh/infermesh/pkg/test/logbuf"
)

// seedDir is the seed's manifests as a user writes them, with the pods
// file mode needs.
const seedDir = "../../../examples/seed"

// inference turns the inference extension on, as the README's commands do.
var inference = []string{"ENABLE_GATEWAY_API_INFERENCE_EXTENSION", "true"}

// printedDoc is one document status -f prints.
type printedDoc struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Status     struct {
		Parents []struct {
			ParentRef struct {
				Group, Kind, Namespace, Name string
			} `json:"parentRef"`
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"parents"`
		Ancestors []struct {
			AncestorRef struct {
				Group, Kind, Namespace, Name string
			} `json:"ancestorRef"`
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"ancestors"`
		Conditions []metav1.Condition `json:"conditions"`
	} `json:"status"`
	Spec corev1.ServiceSpec `json:"spec"`
}

func statusOf(t *testing.T, dir string, env ...string) ([]printedDoc, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := runStatus(ctx, &out, &errOut, dir, envOf(env...), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	var docs []printedDoc
	for _, d := range strings.Split(out.String(), "---\n") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		var p printedDoc
		if err := yaml.Unmarshal([]byte(d), &p); err != nil {
			t.Fatalf("status printed a document that is not YAML: %v\n%s", err, d)
		}
		docs = append(docs, p)
	}
	return docs, errOut.String(), err
}

func findDoc(docs []printedDoc, kind, ns, name string) *printedDoc {
	for i := range docs {
		if docs[i].Kind == kind && docs[i].Metadata.Namespace == ns && docs[i].Metadata.Name == name {
			return &docs[i]
		}
	}
	return nil
}

func condition(conds []metav1.Condition, typ string) string {
	for _, c := range conds {
		if c.Type == typ {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return "missing"
}

// TestStatusSeed: status -f on the seed prints the pool status
// (Accepted=True, ResolvedRefs=True) and the shadow Service
// (vllm-llama3-8b-ip-22dc7de1) the seed's write-up shows, and no problems.
func TestStatusSeed(t *testing.T) {
	docs, stderr, err := statusOf(t, seedDir, inference...)
	if err != nil {
		t.Fatalf("status: %v\nstderr: %s", err, stderr)
	}
	pool := findDoc(docs, "InferencePool", "llm-namespace", "vllm-llama3-8b")
	if pool == nil {
		t.Fatalf("no InferencePool status among %d documents", len(docs))
	}
	if len(pool.Status.Parents) != 1 {
		t.Fatalf("pool parents = %+v, want the seed Gateway only", pool.Status.Parents)
	}
	p := pool.Status.Parents[0]
	if p.ParentRef.Kind != "Gateway" || p.ParentRef.Namespace != "gateway-namespace" || p.ParentRef.Name != "gateway" {
		t.Errorf("parentRef = %+v", p.ParentRef)
	}
	for typ, want := range map[string]string{"Accepted": "True/Accepted", "ResolvedRefs": "True/ResolvedRefs"} {
		if got := condition(p.Conditions, typ); got != want {
			t.Errorf("pool %s = %s, want %s", typ, got, want)
		}
	}
	for _, c := range p.Conditions {
		if c.LastTransitionTime.IsZero() {
			t.Errorf("condition %s has no lastTransitionTime", c.Type)
		}
	}
	svc := findDoc(docs, "Service", "llm-namespace", "vllm-llama3-8b-ip-22dc7de1")
	if svc == nil {
		t.Fatal("no shadow Service printed")
	}
	if svc.Spec.ClusterIP != "None" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 54321 || svc.Spec.Ports[0].TargetPort.IntValue() != 8000 {
		t.Errorf("shadow Service spec = %+v, want headless 54321 -> 8000", svc.Spec)
	}
	route := findDoc(docs, "HTTPRoute", "llm-namespace", "llm-route")
	if route == nil || len(route.Status.Parents) != 1 || condition(route.Status.Parents[0].Conditions, "Accepted") != "True/Accepted" {
		t.Errorf("route status = %+v", route)
	}
	if gw := findDoc(docs, "Gateway", "gateway-namespace", "gateway"); gw == nil || condition(gw.Status.Conditions, "Accepted") != "True/Accepted" {
		t.Errorf("gateway status = %+v", gw)
	}
}

// TestStatusInferenceOff: without the flag the route names the reason and
// no pool status or shadow Service is printed.
func TestStatusInferenceOff(t *testing.T) {
	docs, _, err := statusOf(t, seedDir)
	if err != nil {
		t.Fatal(err)
	}
	if findDoc(docs, "InferencePool", "llm-namespace", "vllm-llama3-8b") != nil || findDoc(docs, "Service", "llm-namespace", "vllm-llama3-8b-ip-22dc7de1") != nil {
		t.Error("pool status or shadow Service printed with the inference extension off")
	}
	route := findDoc(docs, "HTTPRoute", "llm-namespace", "llm-route")
	if route == nil || condition(route.Status.Parents[0].Conditions, "ResolvedRefs") != "False/InvalidKind" {
		t.Errorf("route status = %+v, want ResolvedRefs False/InvalidKind", route)
	}
}

// TestStatusBackendTLSPolicy: status -f prints our status.ancestors entry
// of a BackendTLSPolicy (before, it printed none), here one on the seed's
// EPP Service whose CA ConfigMap is missing: the seed Gateway is its
// ancestor (a route calls the EPP through it), Accepted=False/
// NoValidCACertificate, ResolvedRefs=False/InvalidCACertificateRef; and
// the route and pool through it say so.
func TestStatusBackendTLSPolicy(t *testing.T) {
	dir := copySeed(t)
	b, err := os.ReadFile("testdata/check/epp-tls-missing-ca/50-backendtlspolicy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "50-backendtlspolicy.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	docs, stderr, err := statusOf(t, dir, inference...)
	if err != nil {
		t.Fatalf("status: %v\nstderr: %s", err, stderr)
	}
	p := findDoc(docs, "BackendTLSPolicy", "llm-namespace", "epp-tls")
	if p == nil || p.APIVersion != "gateway.networking.k8s.io/v1" || len(p.Status.Ancestors) != 1 {
		t.Fatalf("BackendTLSPolicy status = %+v", p)
	}
	a := p.Status.Ancestors[0]
	if a.AncestorRef.Kind != "Gateway" || a.AncestorRef.Namespace != "gateway-namespace" || a.AncestorRef.Name != "gateway" {
		t.Errorf("ancestorRef = %+v", a.AncestorRef)
	}
	for typ, want := range map[string]string{"Accepted": "False/NoValidCACertificate", "ResolvedRefs": "False/InvalidCACertificateRef"} {
		if got := condition(a.Conditions, typ); got != want {
			t.Errorf("policy %s = %s, want %s", typ, got, want)
		}
	}
	route := findDoc(docs, "HTTPRoute", "llm-namespace", "llm-route")
	if route == nil || condition(route.Status.Parents[0].Conditions, "ResolvedRefs") != "False/InvalidBackendTLS" {
		t.Errorf("route status = %+v, want ResolvedRefs False/InvalidBackendTLS", route)
	}
	pool := findDoc(docs, "InferencePool", "llm-namespace", "vllm-llama3-8b")
	if pool == nil || condition(pool.Status.Parents[0].Conditions, "ResolvedRefs") != "False/InvalidExtensionRef" {
		t.Errorf("pool status = %+v, want ResolvedRefs False/InvalidExtensionRef", pool)
	}
}

// copySeed copies the seed folder into a temporary one.
func copySeed(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(seedDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(seedDir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestStatusBadManifest: a broken file is named on stderr with its
// document, the command fails after printing, and the rest still loads.
func TestStatusBadManifest(t *testing.T) {
	dir := copySeed(t)
	bad := "apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata:\n  name: too-many-ports\n  namespace: llm-namespace\nspec:\n" +
		"  selector:\n    matchLabels:\n      app: x\n  targetPorts: [{number: 1},{number: 2},{number: 3},{number: 4},{number: 5},{number: 6},{number: 7},{number: 8},{number: 9}]\n" +
		"  endpointPickerRef:\n    name: epp\n    port:\n      number: 9002\n"
	if err := os.WriteFile(filepath.Join(dir, "50-bad.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	docs, stderr, err := statusOf(t, dir, inference...)
	if !errors.Is(err, errManifestProblems) {
		t.Fatalf("err = %v, want errManifestProblems", err)
	}
	for _, want := range []string{"50-bad.yaml:1: document 1", "spec.targetPorts"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
	if findDoc(docs, "InferencePool", "llm-namespace", "vllm-llama3-8b") == nil {
		t.Error("the good pool's status is missing")
	}
	if findDoc(docs, "Service", "llm-namespace", gateway.ShadowServiceName("too-many-ports")) != nil {
		t.Error("the rejected pool got a shadow Service")
	}
}

// TestProxyConfigOfflineSeed: proxy-config -f on the seed prints the shadow
// cluster with its three endpoints, the EPP cluster and the route with its
// ext_proc override, with no server running.
func TestProxyConfigOfflineSeed(t *testing.T) {
	d := fakeDeps(t, inference...)
	out, err := run(t, d, "proxy-config", "endpoints", "--gateway", seedGateway, "-f", seedDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{"10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000"} {
		if !strings.Contains(out, ip) || !strings.Contains(out, seedShadowCluster) {
			t.Errorf("endpoints lack %s of %s:\n%s", ip, seedShadowCluster, out)
		}
	}
	out, err = run(t, d, "proxy-config", "routes", "--gateway", seedGateway, "-f", seedDir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"envoy.filters.http.ext_proc", seedEPPCluster, "FULL_DUPLEX_STREAMED", `"failureModeAllow": true`} {
		if !strings.Contains(out, want) {
			t.Errorf("routes JSON lacks %q", want)
		}
	}
	_, err = run(t, d, "proxy-config", "clusters", "--gateway", "gateway-namespace/nope", "-f", seedDir)
	wantErr(t, err, "gateway-namespace/nope", "not a Gateway of ours")
}

// TestProxyConfigOfflineMatchesServer: file mode serves what the offline
// command prints. For the same
// folder, proxy-config -f and proxy-config against a running discovery -f
// print the same bytes, for every kind and output format.
func TestProxyConfigOfflineMatchesServer(t *testing.T) {
	d := fakeDeps(t, inference...)
	a := startDiscovery(t, d, "discovery", "-f", seedDir, "--plaintext", "--ads-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--debug-address", "")
	waitReady(t, "http://"+a.HTTP.String()+"/ready")
	for _, kind := range []string{kindListeners, kindRoutes, kindClusters, kindEndpoints, kindAll} {
		for _, o := range []string{outputShort, outputJSON} {
			offline, err := run(t, d, "proxy-config", kind, "--gateway", seedGateway, "-f", seedDir, "-o", o)
			if err != nil {
				t.Fatalf("%s -o %s offline: %v", kind, o, err)
			}
			online, err := run(t, d, "proxy-config", kind, "--gateway", seedGateway, "--xds-address", a.ADS.String(), "--plaintext", "-o", o)
			if err != nil {
				t.Fatalf("%s -o %s online: %v", kind, o, err)
			}
			if offline != online {
				t.Errorf("%s -o %s: offline and online differ:\noffline:\n%s\nonline:\n%s", kind, o, offline, online)
			}
			if len(offline) < 50 {
				t.Errorf("%s -o %s printed almost nothing: %q", kind, o, offline)
			}
		}
	}
}

// TestProxyConfigSecretOffline: proxy-config secret lists the SDS secrets
// a Gateway's HTTPS listener names, with istioctl's columns, the private
// key redacted in JSON; another Gateway's proxy lists none.
func TestProxyConfigSecretOffline(t *testing.T) {
	dir := t.TempDir()
	seed, err := filepath.Glob(filepath.Join(seedDir, "*.yaml"))
	if err != nil || len(seed) == 0 {
		t.Fatalf("seed manifests: %v %v", seed, err)
	}
	for _, f := range seed {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	certPEM, keyPEM, err := certs.SelfSignedFor("llm.example.com", nil, []string{"llm.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	cert := firstCertificate(certPEM)
	secret, err := yaml.Marshal(&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "llm-cert", Namespace: "gateway-namespace"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: https
  namespace: gateway-namespace
spec:
  gatewayClassName: istio
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    hostname: llm.example.com
    tls:
      mode: Terminate
      certificateRefs:
      - name: llm-cert
`
	if err := os.WriteFile(filepath.Join(dir, "50-https.yaml"), []byte(gw+"---\n"+string(secret)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := fakeDeps(t, inference...)
	out, err := run(t, d, "proxy-config", "secret", "--gateway", "gateway-namespace/https", "-f", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one secret, got:\n%s", out)
	}
	wantRow := []string{"kubernetes-gateway://gateway-namespace/llm-cert", "Cert", "Chain", "ACTIVE", "true",
		cert.SerialNumber.Text(16), cert.NotAfter.UTC().Format(time.RFC3339), cert.NotBefore.UTC().Format(time.RFC3339)}
	if got := strings.Fields(lines[1]); !slices.Equal(got, wantRow) {
		t.Errorf("secret row = %q, want %q", got, wantRow)
	}
	if h := strings.Fields(lines[0]); !slices.Equal(h, strings.Fields("RESOURCE NAME TYPE STATUS VALID CERT SERIAL NUMBER NOT AFTER NOT BEFORE")) {
		t.Errorf("header = %q", h)
	}
	js, err := run(t, d, "proxy-config", "s", "--gateway", "gateway-namespace/https", "-f", dir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	keyBody := strings.Split(string(keyPEM), "\n")[1]
	if !strings.Contains(js, `"privateKey"`) || strings.Contains(js, keyBody) {
		t.Errorf("JSON must show the private key field redacted, never its bytes:\n%s", js)
	}
	var secrets []struct {
		Name           string `json:"name"`
		TLSCertificate struct {
			PrivateKey struct {
				InlineBytes []byte `json:"inlineBytes"`
			} `json:"privateKey"`
		} `json:"tlsCertificate"`
	}
	if err := json.Unmarshal([]byte(js), &secrets); err != nil {
		t.Fatalf("JSON: %v\n%s", err, js)
	}
	if len(secrets) != 1 || string(secrets[0].TLSCertificate.PrivateKey.InlineBytes) != "[redacted]" {
		t.Errorf("secrets = %+v, want one with the private key [redacted]", secrets)
	}
	// The seed Gateway names no secret: its proxy gets none.
	out, err = run(t, d, "proxy-config", "secrets", "--gateway", seedGateway, "-f", dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 1 || strings.Contains(out, "llm-cert") {
		t.Errorf("the seed Gateway's proxy lists secrets:\n%s", out)
	}
}

// TestProxyConfigOfflineQuiet: proxy-config -f prints its table and logs
// nothing about its in-process server's pushes (README walk, defect 11).
func TestProxyConfigOfflineQuiet(t *testing.T) {
	logs := &logbuf.Buffer{}
	d := fakeDeps(t, inference...)
	d.stderr = logs
	out, err := run(t, d, "proxy-config", "clusters", "--gateway", seedGateway, "-f", seedDir, "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, seedShadowCluster[strings.LastIndex(seedShadowCluster, "|")+1:]) {
		t.Fatalf("no clusters table:\n%s", out)
	}
	if l := logs.Lines("xds: "); len(l) > 0 {
		t.Errorf("proxy-config -f logged its server's pushes:\n%s", strings.Join(l, "\n"))
	}
}

// listenerSetManifests: a Gateway admitting ListenerSets of its namespace,
// one ListenerSet adding listener extra (8080, extra.example.com), and a
// route to the ListenerSet.
const listenerSetManifests = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: istio
  allowedListeners: {namespaces: {from: Same}}
  listeners:
  - {name: http, port: 80, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: ls, namespace: default}
spec:
  parentRef: {name: gw}
  listeners:
  - {name: extra, port: 8080, protocol: HTTP, hostname: extra.example.com}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{kind: ListenerSet, name: ls}]
  rules: [{}]
`

// TestStatusListenerSet: status -f reads ListenerSets: one the Gateway
// admits is printed Accepted (Programmed Pending: nothing is deployed),
// with the route naming it attached to its listener.
func TestStatusListenerSet(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ls.yaml"), []byte(listenerSetManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	docs, stderr, err := statusOf(t, dir)
	if err != nil {
		t.Fatalf("status: %v\nstderr: %s", err, stderr)
	}
	ls := findDoc(docs, "ListenerSet", "default", "ls")
	if ls == nil || condition(ls.Status.Conditions, "Accepted") != "True/Accepted" ||
		condition(ls.Status.Conditions, "Programmed") != "False/Pending" {
		t.Fatalf("ListenerSet status = %+v", ls)
	}
	route := findDoc(docs, "HTTPRoute", "default", "r")
	if route == nil || len(route.Status.Parents) != 1 || route.Status.Parents[0].ParentRef.Kind != "ListenerSet" ||
		condition(route.Status.Parents[0].Conditions, "Accepted") != "True/Accepted" {
		t.Errorf("route status = %+v", route)
	}
}

// TestProxyConfigListenerSet: discovery -f serves a ListenerSet's listener
// and the routes attached to it, as status -f reports them
// (TestStatusListenerSet): listener 0.0.0.0_8080 and extra.example.com in
// its route configuration.
func TestProxyConfigListenerSet(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ls.yaml"), []byte(listenerSetManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	d := fakeDeps(t)
	out, err := run(t, d, "proxy-config", "listeners", "--gateway", "default/gw", "-f", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "8080") || !strings.Contains(out, "http.8080") {
		t.Errorf("the ListenerSet's listener (8080) is not served:\n%s", out)
	}
	out, err = run(t, d, "proxy-config", "routes", "--gateway", "default/gw", "-f", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "extra.example.com") || !strings.Contains(out, "default.r.0") {
		t.Errorf("the route attached to the ListenerSet is not served:\n%s", out)
	}
}
