// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"encoding/pem"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// testCA is a PEM block of type CERTIFICATE (its contents are not parsed).
func testCA(what string) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(what)}))
}

func caConfigMap(name, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: name},
		Data: map[string]string{CACertificateKey: data}}
}

// backendTLSPolicy targets the seed's EPP Service, hostname epp.example.com,
// with the given validation CA settings.
func backendTLSPolicy(name string, mutate func(*gwv1.BackendTLSPolicyValidation)) *gwv1.BackendTLSPolicy {
	p := &gwv1.BackendTLSPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: name},
		Spec: gwv1.BackendTLSPolicySpec{
			TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{{
				LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Group: "", Kind: "Service", Name: seed.EPPName},
			}},
			Validation: gwv1.BackendTLSPolicyValidation{
				Hostname:          "epp.example.com",
				CACertificateRefs: []gwv1.LocalObjectReference{{Group: "", Kind: "ConfigMap", Name: "epp-ca"}},
			},
		},
	}
	if mutate != nil {
		mutate(&p.Spec.Validation)
	}
	return p
}

func TestResolveBackendTLSPolicy(t *testing.T) {
	configMaps := map[string]*corev1.ConfigMap{
		"epp-ca":   caConfigMap("epp-ca", testCA("one")),
		"other-ca": caConfigMap("other-ca", strings.TrimSuffix(testCA("two"), "\n")),
		"no-key":   {ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "no-key"}, Data: map[string]string{"tls.crt": testCA("x")}},
		"not-pem":  caConfigMap("not-pem", "hello"),
	}
	lookup := func(name string) *corev1.ConfigMap { return configMaps[name] }
	system := gwv1.WellKnownCACertificatesSystem
	cases := []struct {
		name    string
		mutate  func(*gwv1.BackendTLSPolicyValidation)
		want    *model.EPPTLS
		wantErr string
	}{{
		name: "CA from ConfigMap ca.crt; hostname is SNI and SAN",
		want: &model.EPPTLS{SNI: "epp.example.com", CACertificates: []byte(testCA("one")), SubjectAltNames: []string{"epp.example.com"}},
	}, {
		name: "several CA ConfigMaps are concatenated in order",
		mutate: func(v *gwv1.BackendTLSPolicyValidation) {
			v.CACertificateRefs = []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: "other-ca"}, {Kind: "ConfigMap", Name: "epp-ca"}}
		},
		want: &model.EPPTLS{SNI: "epp.example.com", CACertificates: []byte(testCA("two") + testCA("one")),
			SubjectAltNames: []string{"epp.example.com"}},
	}, {
		name: "subjectAltNames replace the hostname for verification",
		mutate: func(v *gwv1.BackendTLSPolicyValidation) {
			v.SubjectAltNames = []gwv1.SubjectAltName{{Type: gwv1.HostnameSubjectAltNameType, Hostname: "a.example.com"},
				{Type: gwv1.HostnameSubjectAltNameType, Hostname: "b.example.com"}}
		},
		want: &model.EPPTLS{SNI: "epp.example.com", CACertificates: []byte(testCA("one")),
			SubjectAltNames: []string{"a.example.com", "b.example.com"}},
	}, {
		name: "System CAs: no CA bytes, and not insecure",
		mutate: func(v *gwv1.BackendTLSPolicyValidation) {
			v.CACertificateRefs, v.WellKnownCACertificates = nil, &system
		},
		want: &model.EPPTLS{SNI: "epp.example.com", SubjectAltNames: []string{"epp.example.com"}},
	}, {
		name:    "missing ConfigMap",
		mutate:  func(v *gwv1.BackendTLSPolicyValidation) { v.CACertificateRefs[0].Name = "absent" },
		wantErr: `caCertificateRefs[0]: ConfigMap "absent" not found`,
	}, {
		name:    "ConfigMap without ca.crt",
		mutate:  func(v *gwv1.BackendTLSPolicyValidation) { v.CACertificateRefs[0].Name = "no-key" },
		wantErr: "no PEM certificate under key ca.crt",
	}, {
		name:    "ca.crt without a certificate",
		mutate:  func(v *gwv1.BackendTLSPolicyValidation) { v.CACertificateRefs[0].Name = "not-pem" },
		wantErr: "no PEM certificate",
	}, {
		name:    "a Secret is not supported",
		mutate:  func(v *gwv1.BackendTLSPolicyValidation) { v.CACertificateRefs[0].Kind = "Secret" },
		wantErr: `kind "Secret"`,
	}, {
		name: "URI SANs, alone or beside Hostname ones",
		mutate: func(v *gwv1.BackendTLSPolicyValidation) {
			v.SubjectAltNames = []gwv1.SubjectAltName{{Type: gwv1.URISubjectAltNameType, URI: "spiffe://cluster.local/ns/llm/sa/epp"},
				{Type: gwv1.HostnameSubjectAltNameType, Hostname: "a.example.com"}}
		},
		want: &model.EPPTLS{SNI: "epp.example.com", CACertificates: []byte(testCA("one")),
			SubjectAltNames: []string{"a.example.com"}, URISubjectAltNames: []string{"spiffe://cluster.local/ns/llm/sa/epp"}},
	}, {
		name: "an unknown SAN type",
		mutate: func(v *gwv1.BackendTLSPolicyValidation) {
			v.SubjectAltNames = []gwv1.SubjectAltName{{Type: "IPAddress"}}
		},
		wantErr: `subjectAltNames[0]: type "IPAddress"`,
	}, {
		name: "an unknown well-known CA set",
		mutate: func(v *gwv1.BackendTLSPolicyValidation) {
			v.CACertificateRefs, v.WellKnownCACertificates = nil, ptr.To(gwv1.WellKnownCACertificatesType("example.com/corp"))
		},
		wantErr: "only System",
	}, {
		name:    "both CA sources",
		mutate:  func(v *gwv1.BackendTLSPolicyValidation) { v.WellKnownCACertificates = &system },
		wantErr: "exclusive",
	}, {
		name:    "no CA source",
		mutate:  func(v *gwv1.BackendTLSPolicyValidation) { v.CACertificateRefs = nil },
		wantErr: "required",
	}, {
		name:    "no hostname",
		mutate:  func(v *gwv1.BackendTLSPolicyValidation) { v.Hostname = "" },
		wantErr: "hostname is required",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveBackendTLSPolicy(backendTLSPolicy("epp-tls", tc.mutate), lookup)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q (got %+v)", err, tc.wantErr, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("EPPTLS (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDestinationRuleHost(t *testing.T) {
	cases := []struct{ host, want string }{
		{"vllm-llama3-8b-epp", eppHost},
		{eppHost, eppHost},
		{"vllm-llama3-8b-epp.llm-namespace", "vllm-llama3-8b-epp.llm-namespace"}, // as Istio: dotted names are not expanded
		{"*.llm-namespace.svc.cluster.local", ""},
		{"*", ""},
	}
	for _, tc := range cases {
		dr := kubelib.DestinationRule{Namespace: seed.Namespace, Name: "epp", Host: tc.host}
		if got := DestinationRuleHost(dr, domain); got != tc.want {
			t.Errorf("DestinationRuleHost(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}

func TestDestinationRuleTLS(t *testing.T) {
	cases := []struct {
		name string
		tls  *kubelib.ClientTLS
		want *model.EPPTLS
	}{
		{"no tls", nil, nil},
		{"DISABLE", &kubelib.ClientTLS{Mode: kubelib.TLSModeDisable}, nil},
		{"MUTUAL: TLS without the client certificate, never plaintext", &kubelib.ClientTLS{Mode: kubelib.TLSModeMutual, CredentialName: "c", SNI: "epp.example"},
			&model.EPPTLS{SNI: "epp.example"}},
		{"ISTIO_MUTUAL: TLS without the client certificate", &kubelib.ClientTLS{Mode: kubelib.TLSModeIstioMutual}, &model.EPPTLS{}},
		{"SIMPLE insecureSkipVerify (the seed)", &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, InsecureSkipVerify: true},
			&model.EPPTLS{InsecureSkipVerify: true}},
		{"SIMPLE with sni; the caCertificates path is not inlined", &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple,
			SNI: "epp.example.com", CACertificates: "/etc/certs/ca.pem"}, &model.EPPTLS{SNI: "epp.example.com"}},
		{"SIMPLE with subjectAltNames: the names the EPP's certificate must carry", &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple,
			SNI: "epp.example.com", SubjectAltNames: []string{"epp-a.example.com", "epp-b.example.com"}},
			&model.EPPTLS{SNI: "epp.example.com", SubjectAltNames: []string{"epp-a.example.com", "epp-b.example.com"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DestinationRuleTLS(kubelib.DestinationRule{Namespace: seed.Namespace, Name: "epp", Host: seed.EPPName, TLS: tc.tls})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DestinationRuleTLS (-want +got):\n%s", diff)
			}
		})
	}
}
