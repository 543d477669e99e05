// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// seedArgs are -f flags for every seed manifest except those named in skip
// (relative to seedDir).
func seedArgs(t *testing.T, skip ...string) []string {
	t.Helper()
	var args []string
	err := filepath.WalkDir(seedDir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(seedDir, p)
		for _, s := range skip {
			if rel == s {
				return nil
			}
		}
		args = append(args, "-f", p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// runCheck runs `pilot-discovery check` with args and returns its stdout.
func runCheck(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runCheckEnv(t, nil, args...)
}

// runCheckEnv is runCheck with the feature flags env (NAME, value, ...)
// beside the inference extension's.
func runCheckEnv(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCommandWith(fakeDeps(t, append(slices.Clone(inference), env...)...))
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(append([]string{"check", "--timeout", "60s"}, args...))
	err := cmd.Execute()
	return out.String(), err
}

func TestCheckSeedHasNoProblem(t *testing.T) {
	out, err := runCheck(t, "-f", seedDir)
	if err != nil {
		t.Fatalf("check on the seed: %v\n%s", err, out)
	}
	if strings.TrimSpace(out) != "no problems found" {
		t.Errorf("check on the seed printed:\n%s", out)
	}
}

// TestCheck runs check on each broken folder of testdata/check (with the
// seed's other manifests): it exits 1 and names the problem and its file or
// object.
func TestCheck(t *testing.T) {
	cases := []struct {
		dir  string
		skip []string
		want []string
	}{
		{"listener-filter-refs", []string{"40-gateway.yaml"}, []string{
			"condition  Gateway gateway-namespace/gateway listener http: ResolvedRefs=False (InvalidListenerFilterRef): " +
				"filters.requests[0]: ExternalProcessor gateway-namespace/bbr not found",
			"condition  Gateway gateway-namespace/gateway listener router: ResolvedRefs=False (InvalidListenerFilterRef): " +
				`filters.requests[0]: extensionRef kind BodyRouter in group "example.com" is not supported`,
		}},
		{"rejected-manifest", []string{"30-inferencepool.yaml"}, []string{
			"rejected   testdata/check/rejected-manifest/30-inferencepool.yaml:4: document 1 (InferencePool llm-namespace/vllm-llama3-8b): spec.targetPorts: Too many: 9: must have at most 8 items",
		}},
		{"missing-pool", []string{"30-inferencepool.yaml"}, []string{
			"condition  HTTPRoute llm-namespace/llm-route (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (BackendNotFound)",
			"vllm-llama3-8b-typo",
		}},
		{"pool-without-epp", []string{"30-inferencepool.yaml"}, []string{
			"condition  HTTPRoute llm-namespace/llm-route (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (BackendNotFound)",
			"condition  InferencePool llm-namespace/vllm-llama3-8b (parent Gateway gateway-namespace/gateway): ResolvedRefs=False",
			"no-such-epp",
		}},
		{"bad-regex", []string{"30-inferencepool.yaml"}, []string{
			"dropped    HTTPRoute llm-namespace/llm-route (parent Gateway gateway-namespace/gateway): PartiallyInvalid=True (UnsupportedValue): Dropped Rule",
			"/v1/(models",
		}},
		{"listenerset-not-allowed", nil, []string{
			"condition  ListenerSet gateway-namespace/extra: Accepted=False (NotAllowed): Gateway gateway-namespace/gateway has no spec.allowedListeners",
			"condition  ListenerSet gateway-namespace/extra: Programmed=False (NotAllowed)",
		}},
		{"unknown-parent", []string{"30-inferencepool.yaml"}, []string{
			"parent     HTTPRoute llm-namespace/llm-route: spec.parentRefs[0]: Gateway gateway-namespace/sharred does not exist in the inputs: " +
				"nothing is attached through it (Gateways in namespace gateway-namespace: gateway)",
		}},
		{"unknown-listenerset-parent", nil, []string{
			"parent     ListenerSet gateway-namespace/extra: spec.parentRef: Gateway gateway-namespace/gateway-shared does not exist in the inputs",
			"parent     HTTPRoute gateway-namespace/via-listenerset: spec.parentRefs[0]: ListenerSet gateway-namespace/extras does not exist in the inputs: " +
				"the route is attached nowhere through it (ListenerSets in namespace gateway-namespace: extra)",
		}},
		{"pool-selects-no-pod", []string{"30-inferencepool.yaml"}, []string{
			"pods       InferencePool llm-namespace/vllm-llama3-8b: spec.selector: matches no Pod and no pod template " +
				"(of a Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob) in namespace llm-namespace: selector app=vllm-llama3-8bb",
		}},
		{"expired-certificate", nil, []string{
			"expired    Gateway gateway-namespace/secure listener https: spec.listeners[1].tls.certificateRefs[0]: the certificate of " +
				"Secret gateway-namespace/llm-cert (for llm.ssup2.com) expired at 2021-01-01T00:00:00Z: clients refuse it",
		}},
		{"hostname-takeover", []string{"40-gateway.yaml"}, []string{
			"condition  ListenerSet tenant-b/grab listener llm: TakesHostnames=True (HostnameConflict): takes llm.ssup2.com from 1 route(s) " +
				"of other namespaces attached through less specific listeners",
			"condition  HTTPRoute llm-namespace/llm-route (parent Gateway gateway-namespace/gateway): Conflicted=True (HostnameConflict): " +
				"requests for llm.ssup2.com, which this route claims through listener http, go to listener llm of ListenerSet tenant-b/grab, " +
				`whose hostname "llm.ssup2.com" is more specific`,
			"2 problem(s) found",
		}},
		{"epp-tls-missing-ca", nil, []string{
			`condition  HTTPRoute llm-namespace/llm-route (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (InvalidBackendTLS): ` +
				`InferencePool llm-namespace/vllm-llama3-8b: Endpoint Picker Service llm-namespace/vllm-llama3-8b-epp port 9002: ` +
				`BackendTLSPolicy llm-namespace/epp-tls is not accepted: spec.validation.caCertificateRefs[0]: ConfigMap "epp-ca" not found`,
			`condition  InferencePool llm-namespace/vllm-llama3-8b (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (InvalidExtensionRef): ` +
				`Endpoint Picker Service llm-namespace/vllm-llama3-8b-epp port 9002: BackendTLSPolicy llm-namespace/epp-tls is not accepted`,
			`condition  BackendTLSPolicy llm-namespace/epp-tls (parent Gateway gateway-namespace/gateway): Accepted=False (NoValidCACertificate): ` +
				`spec.validation.caCertificateRefs[0]: ConfigMap "epp-ca" not found`,
			`condition  BackendTLSPolicy llm-namespace/epp-tls (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (InvalidCACertificateRef): ` +
				`spec.validation.caCertificateRefs[0]: ConfigMap "epp-ca" not found`,
		}},
		{"epp-tls-wrong-kind", nil, []string{
			`condition  HTTPRoute llm-namespace/llm-route (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (InvalidBackendTLS)`,
			`condition  BackendTLSPolicy llm-namespace/epp-tls (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (InvalidKind): ` +
				`spec.validation.caCertificateRefs[0]: kind "Secret" in group "" is not supported (only ConfigMap)`,
		}},
		{"epp-tls-bad-pem", nil, []string{
			`condition  InferencePool llm-namespace/vllm-llama3-8b (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (InvalidExtensionRef)`,
			`condition  BackendTLSPolicy llm-namespace/epp-tls (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (InvalidCACertificateRef): ` +
				`spec.validation.caCertificateRefs[0]: ConfigMap "epp-ca" key ca.crt: PEM block 1 is not a certificate`,
		}},
		{"epp-credential-missing", []string{"20-endpoint-picker.yaml"}, []string{
			`condition  HTTPRoute llm-namespace/llm-route (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (InvalidBackendTLS): ` +
				`InferencePool llm-namespace/vllm-llama3-8b: Endpoint Picker Service llm-namespace/vllm-llama3-8b-epp port 9002: ` +
				`DestinationRule llm-namespace/vllm-llama3-8b-epp-tls: spec.trafficPolicy.tls.credentialName: ` +
				`neither Secret gateway-namespace/epp-ca-cacert nor gateway-namespace/epp-ca exists (the CA is read in the Gateway's namespace, gateway-namespace)`,
			`condition  InferencePool llm-namespace/vllm-llama3-8b (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (InvalidExtensionRef): ` +
				`Endpoint Picker Service llm-namespace/vllm-llama3-8b-epp port 9002: DestinationRule llm-namespace/vllm-llama3-8b-epp-tls: spec.trafficPolicy.tls.credentialName`,
		}},
		{"service-tls-missing-ca", nil, []string{
			`condition  HTTPRoute llm-namespace/web (parent Gateway gateway-namespace/gateway): ResolvedRefs=False (InvalidBackendTLS): ` +
				`Service llm-namespace/web port 443: BackendTLSPolicy llm-namespace/web-tls is not accepted: spec.validation.caCertificateRefs[0]: ConfigMap "web-ca" not found`,
			`condition  BackendTLSPolicy llm-namespace/web-tls (parent Gateway gateway-namespace/gateway): Accepted=False (NoValidCACertificate)`,
		}},
		{"unused-invalid-policy", nil, []string{
			`invalid    BackendTLSPolicy llm-namespace/later-tls: Accepted=False (NoValidCACertificate): spec.validation.caCertificateRefs[0]: ` +
				`ConfigMap "later-ca" not found; no route of ours uses it yet, and one sending to llm-namespace/later would get 500`,
		}},
		{"foreign-service", nil, []string{
			"conflict   InferencePool llm-namespace/vllm-llama3-8b: its shadow Service name is taken: Service llm-namespace/vllm-llama3-8b-ip-22dc7de1 exists without the istio.io/inferencepool-name label",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			args := append(seedArgs(t, tc.skip...), "-f", filepath.Join("testdata/check", tc.dir))
			// A folder's features.env holds the flags it is read with.
			out, err := runCheckEnv(t, corpusFeatures(t, []string{filepath.Join("testdata/check", tc.dir)}), args...)
			if !errors.Is(err, errCheckFailed) {
				t.Fatalf("err = %v, want errCheckFailed; output:\n%s", err, out)
			}
			rejectedExpected := false
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
				rejectedExpected = rejectedExpected || strings.HasPrefix(w, "rejected")
			}
			if !rejectedExpected && strings.Contains(out, "rejected ") {
				t.Errorf("a manifest of the case was rejected; it must break only what it says:\n%s", out)
			}
			if !strings.Contains(out, "problem(s) found") {
				t.Errorf("output lacks the summary:\n%s", out)
			}
		})
	}
}

// TestCheckDuplicateNamesBothFiles: an object declared in two -f paths is
// refused in the second, and the message names the first as the user gave
// it, not by the folder the paths are copied into.
func TestCheckDuplicateNamesBothFiles(t *testing.T) {
	other := t.TempDir()
	ns, err := os.ReadFile(filepath.Join(seedDir, "00-namespaces.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "ns.yaml"), ns, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCheck(t, "-f", seedDir, "-f", other)
	if !errors.Is(err, errCheckFailed) {
		t.Fatalf("err = %v, want errCheckFailed; output:\n%s", err, out)
	}
	want := "rejected   " + filepath.ToSlash(filepath.Join(other, "ns.yaml")) + ":3: document 1 (Namespace llm-namespace): already defined in " +
		seedDir + "/00-namespaces.yaml document 1, which is first by path"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

func TestCheckReadsStdin(t *testing.T) {
	pool, err := os.ReadFile("testdata/check/missing-pool/30-inferencepool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := newRootCommandWith(fakeDeps(t, inference...))
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetIn(bytes.NewReader(pool))
	cmd.SetArgs(append([]string{"check"}, append(seedArgs(t, "30-inferencepool.yaml"), "-f", "-")...))
	if err := cmd.Execute(); !errors.Is(err, errCheckFailed) {
		t.Fatalf("err = %v, want errCheckFailed\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "vllm-llama3-8b-typo") {
		t.Errorf("the route read from stdin is not checked:\n%s", out.String())
	}
}

func TestCheckNeedsFiles(t *testing.T) {
	_, err := runCheck(t)
	wantErr(t, err, "-f is required")
}

// TestCheckSaysItPrecisely: what a new user meets first when a manifest is
// refused. The line is the document's own (its apiVersion, past the
// comments above it, in a file of several documents), documents count from
// 1, the API server's "some validation rules were not checked" is not a
// problem of its own, and a YAML error is one line with no literal \n.
func TestCheckSaysItPrecisely(t *testing.T) {
	dir := t.TempDir()
	body := "# first: fine\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n  namespace: llm-namespace\n---\n" +
		"# second: a key twice, and another\n\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twice\n  name: again\n  namespace: llm-namespace\n" +
		"data:\n  a: x\n  a: y\n"
	if err := os.WriteFile(filepath.Join(dir, "two.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(seedArgs(t, "30-inferencepool.yaml"), "-f", "testdata/check/rejected-manifest", "-f", dir)
	out, err := runCheck(t, args...)
	if !errors.Is(err, errCheckFailed) {
		t.Fatalf("err = %v, want errCheckFailed; output:\n%s", err, out)
	}
	for _, want := range []string{
		"rejected   testdata/check/rejected-manifest/30-inferencepool.yaml:4: document 1 (InferencePool llm-namespace/vllm-llama3-8b): " +
			"spec.targetPorts: Too many: 9: must have at most 8 items (because of this, the CRD's validation rules were not checked: fix it and check again)\n",
		"rejected   " + filepath.ToSlash(filepath.Join(dir, "two.yaml")) + `:14: document 2: invalid YAML: line 14: key "name" already set in map; ` +
			`line 18: key "a" already set in map` + "\n",
		// The pool's one rejection (not two), the YAML error, and the
		// route to the pool left out.
		"3 problem(s) found\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `\n`) || strings.Contains(out, "were not checked because the object was invalid") {
		t.Errorf("output has a literal \\n or the API server's field-less line:\n%s", out)
	}
}

// TestCheckNotes: what check cannot judge is a note, not a problem: a
// route to a Gateway of another class (its controller judges it), and, in a
// folder of Pods, a pool only a workload's pod template selects (file mode
// serves it no endpoint; a cluster would). check still exits 0.
func TestCheckNotes(t *testing.T) {
	dir := t.TempDir()
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: unrelated\n  namespace: llm-namespace\n  labels:\n    app: unrelated\n" +
		"spec:\n  containers:\n  - name: c\n    image: busybox\n"
	if err := os.WriteFile(filepath.Join(dir, "pod.yaml"), []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(seedArgs(t, "file-mode/pods.yaml"), "-f", "testdata/check/other-class-parent", "-f", dir)
	out, err := runCheck(t, args...)
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	for _, want := range []string{
		"note       HTTPRoute gateway-namespace/to-other: spec.parentRefs[0]: Gateway gateway-namespace/other is of GatewayClass other, " +
			"whose controller is example.com/other-controller, not ours: not checked\n",
		"note       InferencePool llm-namespace/vllm-llama3-8b: spec.selector: matches no Pod of the inputs, only the pod template of " +
			"Deployment vllm-llama3-8b: in a cluster their pods are selected",
		"no problems found\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestStatusListsWhatNoStatusSays: status -f prints the problems that have
// no place in a status (an unknown parentRef, a pool that selects no pod,
// an expired listener certificate) on stderr, as check names them, and
// exits 1 after printing the statuses.
func TestStatusListsWhatNoStatusSays(t *testing.T) {
	for _, tc := range []struct{ dir, skip, want string }{
		{"unknown-parent", "30-inferencepool.yaml", "parent     HTTPRoute llm-namespace/llm-route: spec.parentRefs[0]: Gateway gateway-namespace/sharred"},
		{"pool-selects-no-pod", "30-inferencepool.yaml", "pods       InferencePool llm-namespace/vllm-llama3-8b: spec.selector"},
		{"expired-certificate", "", "expired    Gateway gateway-namespace/secure listener https"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			args := append([]string{"status", "--timeout", "60s"}, seedArgs(t, tc.skip)...)
			out, stderr, err := runSplit(t, fakeDeps(t, inference...), append(args, "-f", filepath.Join("testdata/check", tc.dir))...)
			if !errors.Is(err, errNotInStatus) {
				t.Fatalf("err = %v, want errNotInStatus; stderr:\n%s", err, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
			if !strings.Contains(out, "kind: Gateway") {
				t.Errorf("the statuses are not printed:\n%s", out)
			}
		})
	}
}
