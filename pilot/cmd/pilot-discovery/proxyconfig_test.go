// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"sigs.k8s.io/yaml"
)

const seedClustersFromServer = `SERVICE FQDN                                                   PORT      SUBSET     DIRECTION     TYPE     DESTINATION RULE
vllm-llama3-8b-epp.llm-namespace.svc.cluster.local             9002      -          outbound      EDS
vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local     54321     -          outbound      EDS
`

// pc runs proxy-config against addr in plaintext for the seed Gateway.
func pc(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	base := []string{"proxy-config"}
	base = append(base, args[0], "--gateway", seedGateway, "--xds-address", addr, "--timeout", "10s")
	return run(t, defaultDeps(), append(base, args[1:]...)...)
}

// TestProxyConfigADSTables fetches the seed's configuration from a running
// ADS server, as the Gateway's Envoy would, and prints every table.
func TestProxyConfigADSTables(t *testing.T) {
	e := startXDS(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"clusters", "--plaintext"}, seedClustersFromServer},
		{[]string{"endpoints", "--plaintext", "--fqdn", "vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local"}, seedEndpointsTable},
		{[]string{"endpoints", "--plaintext", "--name", seedShadowCluster}, seedEndpointsTable},
		{[]string{"listeners", "--plaintext"}, seedListenersTable},
		{[]string{"routes", "--plaintext", "--name", "http.80"}, seedRoutesTable},
		{[]string{"all", "--plaintext", "--fqdn", "vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local"},
			seedListenersTable + "\n" + seedRoutesTable + "\n" +
				"SERVICE FQDN                                                   PORT      SUBSET     DIRECTION     TYPE     DESTINATION RULE\n" +
				"vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local     54321     -          outbound      EDS\n\n" +
				seedEndpointsTable + "\n" +
				// The seed names no secret: the SDS table has its header only.
				"RESOURCE NAME     TYPE     STATUS     VALID CERT     SERIAL NUMBER     NOT AFTER     NOT BEFORE\n"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := pc(t, e.ads, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, out); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestProxyConfigSourceSeam: the ADS source and the translator run in
// process (what a file-backed source does) print the same JSON for the
// same Gateway.
func TestProxyConfigSourceSeam(t *testing.T) {
	e := startXDS(t)
	out, err := pc(t, e.ads, "all", "--plaintext", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := printResources(&want, kindAll, outputJSON, proxyResources{Resources: seedResources(t)}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want.String(), out); d != "" {
		t.Errorf("ADS vs in-process translation (-want +got):\n%s", d)
	}
}

// TestProxyConfigEnvoyJSON checks the seed's pool route with its ext_proc
// override and its shadow cluster's OverrideHost policy in -o json, and
// that -o yaml is the same document.
func TestProxyConfigEnvoyJSON(t *testing.T) {
	e := startXDS(t)
	routes, err := pc(t, e.ads, "routes", "--plaintext", "--name", "http.80", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"name": "llm-namespace.llm-route.0"`,
		`"cluster": "outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local"`,
		`"@type": "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute"`,
		`"requestBodyMode": "FULL_DUPLEX_STREAMED"`,
		`"clusterName": "outbound|9002||vllm-llama3-8b-epp.llm-namespace.svc.cluster.local"`,
	} {
		if !strings.Contains(routes, want) {
			t.Errorf("routes -o json lacks %s", want)
		}
	}
	clusters, err := pc(t, e.ads, "clusters", "--plaintext", "--fqdn", "vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(clusters), &list); err != nil || len(list) != 1 {
		t.Fatalf("clusters -o json: %d clusters, %v", len(list), err)
	}
	for _, want := range []string{`"name": "envoy.load_balancing_policies.override_host"`, `"key": "x-gateway-destination-endpoint"`, `"name": "envoy.load_balancing_policies.round_robin"`} {
		if !strings.Contains(clusters, want) {
			t.Errorf("clusters -o json lacks %s", want)
		}
	}
	y, err := pc(t, e.ads, "clusters", "--plaintext", "--fqdn", "vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fromYAML []map[string]any
	if err := yaml.Unmarshal([]byte(y), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(list, fromYAML); d != "" {
		t.Errorf("yaml differs from json (-json +yaml):\n%s", d)
	}
}

// TestProxyConfigUnknownGateway: a Gateway the server has no configuration
// for gives errNoConfig after --timeout.
func TestProxyConfigUnknownGateway(t *testing.T) {
	e := startXDS(t)
	start := time.Now()
	_, err := run(t, defaultDeps(), "proxy-config", "clusters", "--gateway", "nope/nope", "--xds-address", e.ads, "--plaintext", "--timeout", "300ms")
	if !errors.Is(err, errNoConfig) {
		t.Fatalf("err = %v, want errNoConfig", err)
	}
	// The monitoring port answers 404 under /debug/: the error names the debug port.
	wantErr(t, err, "gateway nope/nope", "/debug/config_dump?gateway=nope/nope on the debug port", "127.0.0.1:15015")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

// TestProxyConfigSilentServerSuggestsTimeout: a server that accepts the
// connection and never answers ends the call with gRPC's DeadlineExceeded
// status, which does not wrap context.DeadlineExceeded; the error still
// suggests a larger --timeout.
func TestProxyConfigSilentServerSuggestsTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range conns {
					_ = c.Close()
				}
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	for _, transport := range [][]string{{"--plaintext"}, nil} {
		_, err := pc(t, l.Addr().String(), append([]string{"clusters", "--timeout", "300ms"}, transport...)...)
		wantErr(t, err, "DeadlineExceeded", "hint: gave up after --timeout 300ms", "try --timeout 1.2s")
	}
}

func TestProxyConfigFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"proxy-config", "bootstrap", "--gateway", "a/b", "--xds-address", "x:1", "--plaintext"}, `unknown resource kind "bootstrap": want one of listeners (listener, l), routes (route, r), clusters (cluster, c), endpoints (endpoint, ep, eps), secrets (secret, s), all`},
		{[]string{"proxy-config", "--gateway", "a/b", "--xds-address", "x:1", "--plaintext"}, `missing resource kind: want one of listeners (listener, l), routes`},
		{[]string{"proxy-config", "clusters", "--gateway", "ab", "--xds-address", "x:1", "--plaintext"}, `--gateway "ab": want NAMESPACE/NAME`},
		{[]string{"proxy-config", "clusters", "--gateway", "a/b", "--plaintext"}, "--xds-address or -f is required"},
		{[]string{"proxy-config", "clusters", "--xds-address", "x:1", "--plaintext"}, "--gateway is required: the Gateway as NAMESPACE/NAME"},
		{[]string{"proxy-config", "clusters", "--gateway", "a/b", "--xds-address", "127.0.0.1", "--plaintext"}, `--xds-address "127.0.0.1": want [HOST]:PORT`},
		{[]string{"proxy-config", "clusters", "--gateway", "a/b", "--xds-address", "x:1", "-o", "xml"}, `-o "xml": want short, json or yaml`},
		{[]string{"proxy-config", "clusters", "--gateway", "a/b", "--xds-address", "x:1", "--plaintext", "--ca-file", "ca.pem"}, "--plaintext conflicts with --ca-file"},
		{[]string{"proxy-config", "clusters", "--gateway", "a/b", "--xds-address", "x:1", "--plaintext", "--token-file", "tok"}, "--token-file needs TLS"},
		{[]string{"proxy-config", "clusters", "--gateway", "a/b", "--xds-address", "x:1", "--ca-file", "/nonexistent/ca.pem"}, "--ca-file"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args[1:3], " "), func(t *testing.T) {
			_, err := run(t, defaultDeps(), tc.args...)
			wantErr(t, err, tc.want)
		})
	}
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key to dir, and returns their paths (the certificate is its own CA).
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pilot-discovery test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestProxyConfigTLS: with the server on TLS, a client trusting its CA
// gets the configuration; a plaintext client and one that does not trust
// the certificate get an error.
func TestProxyConfigTLS(t *testing.T) {
	cert, key := writeSelfSigned(t, t.TempDir())
	creds, err := serverCredentials(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	e := startXDS(t, grpc.Creds(creds))
	out, err := pc(t, e.ads, "clusters", "--ca-file", cert)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(seedClustersFromServer, out); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := pc(t, e.ads, "clusters", "--plaintext", "--timeout", "2s"); err == nil || errors.Is(err, errNoConfig) {
		t.Errorf("plaintext client against a TLS server: err = %v, want a connection error", err)
	}
	if _, err := pc(t, e.ads, "clusters", "--timeout", "2s"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client without the CA: err = %v, want a certificate error", err)
	}
}

// TestProxyConfigFileRefusedGateway: proxy-config -f on a Gateway the
// translator refuses for its class parameters says so at once, naming the
// problem, instead of waiting for --timeout and suggesting a larger one.
func TestProxyConfigFileRefusedGateway(t *testing.T) {
	dir := copySeed(t)
	class := "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: istio\nspec:\n" +
		"  controllerName: istio.io/gateway-controller\n  parametersRef:\n    group: \"\"\n    kind: ConfigMap\n    name: missing\n    namespace: gateway-namespace\n"
	if err := os.WriteFile(filepath.Join(dir, "05-class.yaml"), []byte(class), 0o644); err != nil {
		t.Fatal(err)
	}
	// --timeout is long: were the command to wait for it, the test would
	// see the hint below rather than the refusal.
	_, err := run(t, fakeDeps(t, inference...), "proxy-config", "clusters", "--gateway", seedGateway, "-f", dir, "--timeout", "30s")
	wantErr(t, err, "gateway "+seedGateway+": refused, so its proxies get no configuration", "ConfigMap gateway-namespace/missing",
		"pilot-discovery check -f "+dir)
	if err != nil && (strings.Contains(err.Error(), "--timeout") || errors.Is(err, errNoConfig)) {
		t.Errorf("error waits for or suggests --timeout: %v", err)
	}
}
