// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
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
	var out bytes.Buffer
	cmd := newRootCommandWith(fakeDeps(t, inference...))
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
		{"rejected-manifest", []string{"30-inferencepool.yaml"}, []string{
			"rejected   testdata/check/rejected-manifest/30-inferencepool.yaml:1: document 0 (InferencePool llm-namespace/vllm-llama3-8b): spec.targetPorts: Too many: 9: must have at most 8 items",
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
			out, err := runCheck(t, args...)
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
	want := "rejected   " + filepath.ToSlash(filepath.Join(other, "ns.yaml")) + ":1: document 0 (Namespace llm-namespace): already defined in " +
		seedDir + "/00-namespaces.yaml document 0, which is first by path"
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
