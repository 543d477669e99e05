// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

// One test per problem a user met with the commands (the Helm chart's is
// tested with the chart, under manifests/). Each drives the commands as a
// user does, and failed on the code before the problem was fixed.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/infermesh/infermesh/pkg/test/logbuf"
)

// execute runs the command tree with args under ctx and returns stdout and
// the error.
func execute(ctx context.Context, d deps, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := newRootCommandWith(d)
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// waitLog waits until logs hold a line with every fragment.
func waitLog(t *testing.T, logs *logbuf.Buffer, what string, fragments ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for l := range strings.Lines(logs.String()) {
			ok := true
			for _, f := range fragments {
				ok = ok && strings.Contains(l, f)
			}
			if ok {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no log line for %s (containing %q) within 30s; logs:\n%s", what, fragments, logs.String())
}

// Why 1: discovery logs nothing when it reloads files or pushes.
func TestWhyDiscoveryLogsReloadsAndPushes(t *testing.T) {
	dir := copySeed(t)
	logs := &logbuf.Buffer{}
	d := fakeDeps(t, inference...)
	d.stderr = logs
	startDiscovery(t, d, "discovery", "-f", dir, "--plaintext", "--ads-address", "127.0.0.1:0",
		"--http-address", "127.0.0.1:0", "--debug-address", "", "--push-debounce", "10ms")
	// The first read has the keys of a reload (README.md, "Logs").
	waitLog(t, logs, "the first read", `"msg":"file: loaded"`, `"changes":"DestinationRules: 1 added; Gateways: 1 added;`, `"objects":11,`, `"rejected":0`)
	waitLog(t, logs, "the first push", `"msg":"xds: pushed"`, `"gateways":1`, `"gatewayNames":["gateway-namespace/gateway"]`, `"resourcesChanged"`)
	route := filepath.Join(dir, "30-inferencepool.yaml")
	b, err := os.ReadFile(route)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(route, bytes.ReplaceAll(b, []byte("llm.ssup2.com"), []byte("llm2.ssup2.com")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitLog(t, logs, "the reload", `"msg":"file: reloaded"`, `"changes":"HTTPRoutes: 1 updated"`)
	waitLog(t, logs, "the push after the edit", `"msg":"xds: pushed"`, `"version":2`)
}

// Why 2: istioctl's kind names, kubectl's -f, --version, and the kinds
// listed when the argument is missing.
func TestWhyKubectlAndIstioctlHabits(t *testing.T) {
	d := fakeDeps(t, inference...)
	ctx := context.Background()
	for _, kind := range []string{"listener", "l", "cluster", "c", "route", "r", "endpoint", "ep"} {
		out, err := execute(ctx, d, "proxy-config", kind, "--gateway", seedGateway, "-f", seedDir)
		if err != nil || !strings.Contains(out, "\n") {
			t.Errorf("proxy-config %s: err %v, output %q", kind, err, out)
		}
	}
	files := []string{"proxy-config", "clusters", "--gateway", seedGateway}
	for _, f := range []string{"00-namespaces.yaml", "10-model-servers.yaml", "20-endpoint-picker.yaml", "30-inferencepool.yaml", "40-gateway.yaml", "file-mode/pods.yaml"} {
		files = append(files, "-f", filepath.Join(seedDir, f))
	}
	if out, err := execute(ctx, d, files...); err != nil || !strings.Contains(out, seedShadowCluster[len("outbound|54321||"):]) {
		t.Errorf("proxy-config -f FILE -f FILE ...: err %v, output:\n%s", err, out)
	}
	if out, err := execute(ctx, d, "--version"); err != nil || !strings.HasPrefix(out, "pilot-discovery ") {
		t.Errorf("--version: err %v, output %q", err, out)
	}
	_, err := execute(ctx, d, "proxy-config", "--gateway", seedGateway, "-f", seedDir)
	wantErr(t, err, "listeners (listener, l)", "clusters (cluster, c)", "endpoints (endpoint, ep, eps)")
}

// Why 3: transport mismatches name the fix.
func TestWhyTransportMismatchHints(t *testing.T) {
	plain := startXDS(t)
	_, err := pc(t, plain.ads, "clusters", "--timeout", "5s")
	wantErr(t, err, "first record does not look like a TLS handshake", "hint:", "add --plaintext")

	cert, key := writeSelfSigned(t, t.TempDir())
	creds, err := serverCredentials(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	tlsSrv := startXDS(t, grpc.Creds(creds))
	_, err = pc(t, tlsSrv.ads, "clusters", "--plaintext", "--timeout", "5s")
	wantErr(t, err, "hint:", "expects TLS: drop --plaintext")

	_, err = run(t, defaultDeps(), "proxy-status", "--debug-address", plain.ads, "--timeout", "5s")
	wantErr(t, err, "hint:", "ADS (gRPC) port", "--debug-address")
}

// Why 4: proxy-config -f exits 0 when manifests were rejected, logs in
// another format than discovery, and times out without naming --timeout.
func TestWhyProxyConfigFileExitLogsTimeout(t *testing.T) {
	d := fakeDeps(t, inference...)
	ctx := context.Background()
	args := append([]string{"proxy-config", "clusters", "--gateway", seedGateway}, seedArgs(t, "30-inferencepool.yaml")...)
	args = append(args, "-f", "testdata/check/rejected-manifest")
	_, err := execute(ctx, d, args...)
	if !errors.Is(err, errManifestProblems) {
		t.Errorf("proxy-config -f with a rejected manifest: err = %v, want errManifestProblems", err)
	}
	if _, err := execute(ctx, d, "proxy-config", "clusters", "--gateway", seedGateway, "-f", seedDir, "--log-format", "json"); err != nil {
		t.Errorf("proxy-config --log-format json: %v", err)
	}
	_, err = execute(ctx, d, "proxy-config", "clusters", "--gateway", seedGateway, "-f", seedDir, "--timeout", "1ms")
	wantErr(t, err, "hint:", "--timeout")
}

// Why 5: the DESTINATION RULE column names the rule that applies.
func TestWhyDestinationRuleColumn(t *testing.T) {
	out, err := execute(context.Background(), fakeDeps(t, inference...), "proxy-config", "clusters", "--gateway", seedGateway, "-f", seedDir)
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "vllm-llama3-8b-epp.llm-namespace.svc.cluster.local") {
			if !strings.HasSuffix(strings.TrimSpace(l), "vllm-llama3-8b-epp-tls.llm-namespace") {
				t.Errorf("EPP cluster row %q lacks DestinationRule vllm-llama3-8b-epp-tls.llm-namespace", l)
			}
			return
		}
	}
	t.Fatalf("no EPP cluster row:\n%s", out)
}

// Why 6: the documents say which CRDs the seed needs in a cluster.
func TestWhySeedCRDsDocumented(t *testing.T) {
	for _, doc := range []string{"../../../examples/README.md", "../../../README.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"destinationrules.networking.istio.io", "inferencepools.inference.networking.k8s.io", "gateway.networking.k8s.io"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s does not name the CRD %s", doc, want)
			}
		}
	}
}

// Why 7: an invalid cluster domain or controller name is refused at start,
// naming the flag or variable.
func TestWhyInvalidClusterDomainRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := execute(ctx, fakeDeps(t, inference...), "discovery", "-f", seedDir, "--plaintext", "--cluster-domain", "a b",
		"--ads-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--debug-address", "")
	wantErr(t, err, `--cluster-domain "a b"`, "not a DNS domain")
}

func TestWhyInvalidControllerNameRefused(t *testing.T) {
	_, err := execute(context.Background(), fakeDeps(t, append(inference, "PILOT_GATEWAY_API_CONTROLLER_NAME", "not a name")...), "status", "-f", seedDir)
	wantErr(t, err, "PILOT_GATEWAY_API_CONTROLLER_NAME", "not a Gateway API controller name")
}

// Why 9: a pipeline can gate a merge on the controller's verdict.
func TestWhyCheckGatesAMerge(t *testing.T) {
	args := append([]string{"check"}, seedArgs(t, "30-inferencepool.yaml")...)
	out, err := execute(context.Background(), fakeDeps(t, inference...), append(args, "-f", "testdata/check/missing-pool")...)
	if err == nil {
		t.Fatalf("check on a route to a missing pool exited 0:\n%s", out)
	}
	if !strings.Contains(out, "vllm-llama3-8b-typo") {
		t.Errorf("check does not name the missing pool:\n%s", out)
	}
}

// TestDocsGiveOneGIECRDCommand: the README, manifests/README.md and
// examples/README.md install the GIE CRDs with the same command, and name
// no other way.
func TestDocsGiveOneGIECRDCommand(t *testing.T) {
	// The version is the GIE module's in go.mod, so the docs follow a bump.
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information in the test binary")
	}
	version := ""
	for _, d := range bi.Deps {
		if d.Path == "sigs.k8s.io/gateway-api-inference-extension" {
			version = d.Version
		}
	}
	if version == "" {
		t.Fatal("the test binary does not depend on sigs.k8s.io/gateway-api-inference-extension")
	}
	want := "kubectl apply --server-side -k 'https://github.com/kubernetes-sigs/gateway-api-inference-extension/config/crd?ref=" + version + "'"
	for _, doc := range []string{"../../../README.md", "../../../manifests/README.md", "../../../examples/README.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for l := range strings.Lines(string(b)) {
			if !strings.Contains(l, "gateway-api-inference-extension/config/crd") {
				continue
			}
			n++
			if !strings.Contains(l, want) || strings.Count(l, "config/crd") != 1 {
				t.Errorf("%s installs the GIE CRDs another way: %s", doc, strings.TrimSpace(l))
			}
		}
		if n == 0 {
			t.Errorf("%s gives no GIE CRD install command", doc)
		}
	}
}

// TestDiscoveryLogCountsRouteProblems: discovery -f counts, after a reload,
// the problems check -f would print, a route that went Accepted=False
// included (the file source's own count is the rejected manifests only):
// the route's problem is logged when it appears and when it goes, with a
// summary each time.
func TestDiscoveryLogCountsRouteProblems(t *testing.T) {
	dir := copySeed(t)
	logs := &logbuf.Buffer{}
	d := fakeDeps(t, inference...)
	d.stderr = logs
	startDiscovery(t, d, "discovery", "-f", dir, "--plaintext", "--ads-address", "127.0.0.1:0",
		"--http-address", "127.0.0.1:0", "--debug-address", "", "--push-debounce", "10ms")
	waitLog(t, logs, "the first check", `"msg":"file: checked"`, `"problems":0`, `"rejected":0`)
	route := filepath.Join(dir, "30-inferencepool.yaml")
	b, err := os.ReadFile(route)
	if err != nil {
		t.Fatal(err)
	}
	// A sectionName no listener has: the route goes Accepted=False
	// (NoMatchingParent); no manifest is rejected.
	broken := bytes.Replace(b, []byte("    namespace: gateway-namespace\n"), []byte("    namespace: gateway-namespace\n    sectionName: https\n"), 1)
	if bytes.Equal(broken, b) {
		t.Fatal("the seed's parentRef moved")
	}
	// Written atomically: a write in place can be read half done (empty),
	// which the log tells as the route deleted and added again.
	writeManifest(t, dir, filepath.Base(route), string(broken))
	waitLog(t, logs, "the reload", `"msg":"file: reloaded"`, `"changes":"HTTPRoutes: 1 updated"`, `"rejected":0`)
	waitLog(t, logs, "the route's problem", `"level":"WARN"`, `"msg":"file: problem"`, `"kind":"condition"`,
		`"object":"HTTPRoute llm-namespace/llm-route"`, `"parent":"Gateway gateway-namespace/gateway"`, `Accepted=False (NoMatchingParent)`)
	// The route's, and its pool's (the route to it is not accepted), as
	// check -f counts them.
	waitLog(t, logs, "the count after the reload", `"msg":"file: checked"`, `"problems":2`, `"rejected":0`)
	writeManifest(t, dir, filepath.Base(route), string(b))
	waitLog(t, logs, "the problem resolved", `"msg":"file: problem resolved"`, `"object":"HTTPRoute llm-namespace/llm-route"`)
	waitLog(t, logs, "the count back to 0", `"msg":"file: checked"`, `"problems":0`, `"rejected":0`)
}
