// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// seedDestinationRule is the seed's DestinationRule, verbatim.
const seedDestinationRule = `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: vllm-llama3-8b-epp-tls
  namespace: llm-namespace
spec:
  host: vllm-llama3-8b-epp
  trafficPolicy:
    tls:
      mode: SIMPLE
      insecureSkipVerify: true
`

func parseUnstructured(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

var seedRule = DestinationRule{
	Name:      "vllm-llama3-8b-epp-tls",
	Namespace: "llm-namespace",
	Host:      "vllm-llama3-8b-epp",
	TLS:       &ClientTLS{Mode: TLSModeSimple, InsecureSkipVerify: true},
}

func TestDestinationRuleFromUnstructured(t *testing.T) {
	const head = "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: dr, namespace: ns}\n"
	for _, tc := range []struct {
		name     string
		manifest string
		want     DestinationRule
		wantErr  string // substring of the error; "" = valid
	}{
		{name: "seed", manifest: seedDestinationRule, want: seedRule},
		{name: "no traffic policy", manifest: head + "spec: {host: epp}",
			want: DestinationRule{Name: "dr", Namespace: "ns", Host: "epp"}},
		{name: "null tls", manifest: head + "spec: {host: epp, trafficPolicy: {tls: null}}",
			want: DestinationRule{Name: "dr", Namespace: "ns", Host: "epp"}},
		{name: "mode defaults to DISABLE", manifest: head + "spec: {host: epp, trafficPolicy: {tls: {sni: epp.example}}}",
			want: DestinationRule{Name: "dr", Namespace: "ns", Host: "epp", TLS: &ClientTLS{Mode: TLSModeDisable, SNI: "epp.example"}}},
		{name: "all fields", manifest: head + `spec:
  host: epp.ns.svc.cluster.local
  trafficPolicy:
    tls: {mode: MUTUAL, credentialName: epp-client, caCertificates: /etc/ca.pem, sni: epp, insecureSkipVerify: false,
          subjectAltNames: [epp.example, epp.ns.svc]}
  subsets: [{name: v1}]`,
			want: DestinationRule{Name: "dr", Namespace: "ns", Host: "epp.ns.svc.cluster.local", TLS: &ClientTLS{
				Mode: TLSModeMutual, CredentialName: "epp-client", CACertificates: "/etc/ca.pem", SNI: "epp",
				SubjectAltNames: []string{"epp.example", "epp.ns.svc"}}}},
		{name: "no spec", manifest: head, wantErr: "spec.host is required"},
		{name: "spec a list", manifest: head + "spec: [host]", wantErr: "spec: want an object"},
		{name: "host a number", manifest: head + "spec: {host: 42}", wantErr: "spec.host: want a string"},
		{name: "tls a string", manifest: head + "spec: {host: epp, trafficPolicy: {tls: SIMPLE}}",
			wantErr: "spec.trafficPolicy.tls: want an object"},
		{name: "unknown mode", manifest: head + "spec: {host: epp, trafficPolicy: {tls: {mode: STRICT}}}",
			wantErr: `unknown mode "STRICT"`},
		{name: "insecureSkipVerify a string", manifest: head + `spec: {host: epp, trafficPolicy: {tls: {mode: SIMPLE, insecureSkipVerify: "yes"}}}`,
			wantErr: "insecureSkipVerify: want a boolean"},
		{name: "subjectAltNames a string", manifest: head + `spec: {host: epp, trafficPolicy: {tls: {mode: SIMPLE, subjectAltNames: epp.example}}}`,
			wantErr: "spec.trafficPolicy.tls.subjectAltNames: want a list of strings"},
		{name: "subjectAltNames entry a number", manifest: head + `spec: {host: epp, trafficPolicy: {tls: {mode: SIMPLE, subjectAltNames: [epp, 7]}}}`,
			wantErr: "spec.trafficPolicy.tls.subjectAltNames[1]: want a string"},
		{name: "no namespace", manifest: "metadata: {name: dr}\nspec: {host: epp}", wantErr: "metadata.name and metadata.namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DestinationRuleFromUnstructured(parseUnstructured(t, tc.manifest))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

const malformedDestinationRule = `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: broken, namespace: llm-namespace}
spec: {host: vllm-llama3-8b-epp, trafficPolicy: {tls: {mode: 7}}}
`

// Through the informer: the seed's rule is in the collection, a malformed one
// is not, fixing it adds it, breaking the seed's removes it.
func TestDestinationRulesCollection(t *testing.T) {
	seed, broken := parseUnstructured(t, seedDestinationRule), parseUnstructured(t, malformedDestinationRule)
	c := NewFake(append(OptionalCRDs(), seed, broken)...)
	rules := c.DestinationRules()
	startFake(t, c)
	synced(t, "DestinationRules", rules)

	if diff := cmp.Diff([]DestinationRule{seedRule}, rules.List()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}

	ctx := context.Background()
	drs := c.Dynamic().Resource(DestinationRuleGVR).Namespace("llm-namespace")
	fixed := broken.DeepCopy()
	if err := unstructured.SetNestedField(fixed.Object, "SIMPLE", "spec", "trafficPolicy", "tls", "mode"); err != nil {
		t.Fatal(err)
	}
	if _, err := drs.Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "fixed rule", func() bool { return rules.GetKey("llm-namespace/broken") != nil })

	breakSeed := seed.DeepCopy()
	if err := unstructured.SetNestedField(breakSeed.Object, int64(1), "spec", "host"); err != nil {
		t.Fatal(err)
	}
	if _, err := drs.Update(ctx, breakSeed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "broken seed removed", func() bool { return rules.GetKey("llm-namespace/vllm-llama3-8b-epp-tls") == nil })

	if err := drs.Delete(ctx, "broken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "deleted rule removed", func() bool { return len(rules.List()) == 0 })
}
