// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package upstreamtls

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/test/certs"
)

const ns = "apps"

func caConfigMap(name, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{CACertificateKey: data}}
}

// policy targets Service svc (port section, "" for the whole Service),
// hostname epp.example.com, CA from ConfigMap epp-ca, then mutate.
func policy(name, svc, section string, mutate func(*gwv1.BackendTLSPolicyValidation)) *gwv1.BackendTLSPolicy {
	ref := gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: gwv1.ObjectName(svc)}}
	if section != "" {
		ref.SectionName = ptr.To(gwv1.SectionName(section))
	}
	p := &gwv1.BackendTLSPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 2},
		Spec: gwv1.BackendTLSPolicySpec{
			TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{ref},
			Validation: gwv1.BackendTLSPolicyValidation{
				Hostname:          "epp.example.com",
				CACertificateRefs: []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: "epp-ca"}},
			},
		},
	}
	if mutate != nil {
		mutate(&p.Spec.Validation)
	}
	return p
}

// TestResolvePolicy: each way a BackendTLSPolicy's validation resolves or
// fails, with the Gateway API's Accepted and ResolvedRefs reasons
// (BackendTLSPolicyValidation.caCertificateRefs: a missing or malformed
// reference is InvalidCACertificateRef, another kind InvalidKind, and
// Accepted=False/NoValidCACertificate only when no reference is valid).
func TestResolvePolicy(t *testing.T) {
	one, two := certs.CertPEM(t, "one"), certs.CertPEM(t, "two")
	configMaps := map[string]*corev1.ConfigMap{
		"epp-ca":   caConfigMap("epp-ca", one),
		"other-ca": caConfigMap("other-ca", strings.TrimSuffix(two, "\n")),
		"no-key":   {ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-key"}, Data: map[string]string{"tls.crt": one}},
		"not-pem":  caConfigMap("not-pem", "hello"),
		"garbage":  caConfigMap("garbage", certs.NotACertificatePEM("not a certificate")),
	}
	lookup := func(name string) *corev1.ConfigMap { return configMaps[name] }
	system := gwv1.WellKnownCACertificatesSystem
	refs := func(names ...string) func(*gwv1.BackendTLSPolicyValidation) {
		return func(v *gwv1.BackendTLSPolicyValidation) {
			v.CACertificateRefs = nil
			for _, n := range names {
				kind := "ConfigMap"
				if n == "secret" {
					kind = "Secret"
				}
				v.CACertificateRefs = append(v.CACertificateRefs, gwv1.LocalObjectReference{Kind: gwv1.Kind(kind), Name: gwv1.ObjectName(n)})
			}
		}
	}
	cases := []struct {
		name   string
		mutate func(*gwv1.BackendTLSPolicyValidation)
		want   *model.EPPTLS
		// invalid is "reason: message part" of Accepted=False; refs the
		// same of ResolvedRefs=False.
		invalid, refs string
	}{{
		name: "CA from ConfigMap ca.crt; hostname is SNI and SAN",
		want: &model.EPPTLS{SNI: "epp.example.com", CACertificates: []byte(one), SubjectAltNames: []string{"epp.example.com"}},
	}, {
		name:   "several CA ConfigMaps are concatenated in order",
		mutate: refs("other-ca", "epp-ca"),
		want:   &model.EPPTLS{SNI: "epp.example.com", CACertificates: []byte(two + one), SubjectAltNames: []string{"epp.example.com"}},
	}, {
		name: "subjectAltNames replace the hostname for verification",
		mutate: func(v *gwv1.BackendTLSPolicyValidation) {
			v.SubjectAltNames = []gwv1.SubjectAltName{{Type: gwv1.HostnameSubjectAltNameType, Hostname: "a.example.com"},
				{Type: gwv1.URISubjectAltNameType, URI: "spiffe://cluster.local/ns/llm/sa/epp"}}
		},
		want: &model.EPPTLS{SNI: "epp.example.com", CACertificates: []byte(one),
			SubjectAltNames: []string{"a.example.com"}, URISubjectAltNames: []string{"spiffe://cluster.local/ns/llm/sa/epp"}},
	}, {
		name: "System CAs: no CA bytes, and not insecure",
		mutate: func(v *gwv1.BackendTLSPolicyValidation) {
			v.CACertificateRefs, v.WellKnownCACertificates = nil, &system
		},
		want: &model.EPPTLS{SNI: "epp.example.com", SubjectAltNames: []string{"epp.example.com"}},
	}, {
		name:    "missing ConfigMap",
		mutate:  refs("absent"),
		invalid: `NoValidCACertificate: spec.validation.caCertificateRefs[0]: ConfigMap "absent" not found`,
		refs:    `InvalidCACertificateRef: spec.validation.caCertificateRefs[0]: ConfigMap "absent" not found`,
	}, {
		name:    "a Secret is another kind",
		mutate:  refs("secret"),
		invalid: `NoValidCACertificate: spec.validation.caCertificateRefs[0]: kind "Secret"`,
		refs:    `InvalidKind: spec.validation.caCertificateRefs[0]: kind "Secret" in group "" is not supported`,
	}, {
		name:    "ConfigMap without ca.crt",
		mutate:  refs("no-key"),
		invalid: "NoValidCACertificate: has no key ca.crt",
		refs:    `InvalidCACertificateRef: spec.validation.caCertificateRefs[0]: ConfigMap "no-key" has no key ca.crt`,
	}, {
		name:    "ca.crt without PEM",
		mutate:  refs("not-pem"),
		invalid: "NoValidCACertificate: no PEM certificate",
		refs:    "InvalidCACertificateRef: no PEM certificate",
	}, {
		name:    "a CERTIFICATE block with garbage inside is not inlined",
		mutate:  refs("garbage"),
		invalid: "NoValidCACertificate: PEM block 1 is not a certificate",
		refs:    `InvalidCACertificateRef: spec.validation.caCertificateRefs[0]: ConfigMap "garbage" key ca.crt: PEM block 1 is not a certificate`,
	}, {
		name:   "one valid reference of two: accepted, trusting its CA only; ResolvedRefs names the other",
		mutate: refs("garbage", "epp-ca"),
		want:   &model.EPPTLS{SNI: "epp.example.com", CACertificates: []byte(one), SubjectAltNames: []string{"epp.example.com"}},
		refs:   `InvalidCACertificateRef: spec.validation.caCertificateRefs[0]: ConfigMap "garbage"`,
	}, {
		name:    "every reference invalid: the first one's reason, every message",
		mutate:  refs("secret", "absent"),
		invalid: `NoValidCACertificate: kind "Secret" in group "" is not supported (only ConfigMap); spec.validation.caCertificateRefs[1]: ConfigMap "absent" not found`,
		refs:    "InvalidKind: caCertificateRefs[1]",
	}, {
		name: "an unknown SAN type",
		mutate: func(v *gwv1.BackendTLSPolicyValidation) {
			v.SubjectAltNames = []gwv1.SubjectAltName{{Type: "IPAddress"}}
		},
		invalid: `Invalid: spec.validation.subjectAltNames[0]: type "IPAddress"`,
	}, {
		name: "an unknown well-known CA set",
		mutate: func(v *gwv1.BackendTLSPolicyValidation) {
			v.CACertificateRefs, v.WellKnownCACertificates = nil, ptr.To(gwv1.WellKnownCACertificatesType("example.com/corp"))
		},
		invalid: "Invalid: only System",
	}, {
		name:    "both CA sources",
		mutate:  func(v *gwv1.BackendTLSPolicyValidation) { v.WellKnownCACertificates = &system },
		invalid: "Invalid: exclusive",
	}, {
		name:    "no CA source",
		mutate:  func(v *gwv1.BackendTLSPolicyValidation) { v.CACertificateRefs = nil },
		invalid: "Invalid: one of caCertificateRefs and wellKnownCACertificates is required",
	}, {
		name:    "no hostname",
		mutate:  func(v *gwv1.BackendTLSPolicyValidation) { v.Hostname = "" },
		invalid: "Invalid: hostname is required",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ResolvePolicy(policy("epp-tls", "epp", "", tc.mutate), lookup)
			if diff := cmp.Diff(tc.want, got.TLS); diff != "" {
				t.Errorf("TLS (-want +got):\n%s", diff)
			}
			check := func(what, want string, reason string, msg string) {
				t.Helper()
				if want == "" {
					if reason != "" || msg != "" {
						t.Errorf("%s: got %s: %s, want none", what, reason, msg)
					}
					return
				}
				wantReason, wantMsg, _ := strings.Cut(want, ": ")
				if reason != wantReason || !strings.Contains(msg, wantMsg) {
					t.Errorf("%s: got %s: %q, want %s: containing %q", what, reason, msg, wantReason, wantMsg)
				}
			}
			check("Accepted=False", tc.invalid, string(got.InvalidReason), got.Invalid)
			check("ResolvedRefs=False", tc.refs, string(got.RefsReason), got.RefsMessage)
			if (got.TLS == nil) == (got.Problem() == "") {
				t.Errorf("TLS %v with Problem %q: exactly one must be set", got.TLS, got.Problem())
			}
		})
	}
}

func TestPolicyTargets(t *testing.T) {
	p := policy("p", "a", "", nil)
	p.Spec.TargetRefs = append(p.Spec.TargetRefs,
		gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: "a"},
			SectionName: ptr.To(gwv1.SectionName("grpc"))},
		gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: "a"}},
		gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Group: "example.com", Kind: "Service", Name: "b"}},
		gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: "c"}},
	)
	got := ResolvePolicy(p, func(string) *corev1.ConfigMap { return nil })
	want := []Target{{Service: key("a")}, {Service: key("a"), Section: "grpc"}, {Service: key("c")}}
	if d := cmp.Diff(want, got.Targets); d != "" {
		t.Errorf("targets (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{ns + "/a", ns + "/c"}, got.TargetServices()); d != "" {
		t.Errorf("target Services (-want +got):\n%s", d)
	}
}
