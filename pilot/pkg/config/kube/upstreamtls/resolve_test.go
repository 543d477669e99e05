// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package upstreamtls

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/certs"
)

const domain = "cluster.local"

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func host(name string) string { return name + "." + ns + ".svc." + domain }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// resolved is a valid policy for Service svc (port section) created at
// t0+age, whose TLS sends SNI sni.
func resolved(t *testing.T, name, svc, section string, age time.Duration, sni string) Policy {
	t.Helper()
	p := policy(name, svc, section, func(v *gwv1.BackendTLSPolicyValidation) {
		v.CACertificateRefs, v.WellKnownCACertificates = nil, new(gwv1.WellKnownCACertificatesSystem)
		v.Hostname = gwv1.PreciseHostname(sni)
	})
	p.CreationTimestamp = metav1.NewTime(t0.Add(age))
	return ResolvePolicy(p, nil)
}

// broken is a policy for svc whose CA ConfigMap is missing.
func broken(name, svc, section string, age time.Duration) Policy {
	p := policy(name, svc, section, nil)
	p.CreationTimestamp = metav1.NewTime(t0.Add(age))
	return ResolvePolicy(p, func(string) *corev1.ConfigMap { return nil })
}

func rule(name, namespace, hostName string, age time.Duration, tls *kubelib.ClientTLS) Rule {
	return ResolveRule(kubelib.DestinationRule{Namespace: namespace, Name: name, Host: hostName, Created: t0.Add(age), TLS: tls}, domain)
}

func simple(sni string) *kubelib.ClientTLS {
	return &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, SNI: sni}
}

// TestResolvePrecedence is the one precedence rule, for an EPP Service and
// any other Service port alike (Resolve does not know which it is): per
// port by sectionName, else the Service as a whole, the oldest winning
// (then namespace/name); a BackendTLSPolicy, even an invalid one, over any
// DestinationRule; of DestinationRules, one in the Service's namespace,
// then the oldest.
func TestResolvePrecedence(t *testing.T) {
	grpc := Port{Service: key("epp"), Name: "grpc", Host: host("epp")}
	unnamed := Port{Service: key("epp"), Host: host("epp")}
	for _, tc := range []struct {
		name string
		port Port
		src  Sources
		// want is the SNI of the TLS and the name of its source, "plaintext",
		// or "problem: <part of it>".
		want string
	}{
		{"nothing applies", grpc, Sources{}, "plaintext"},
		{"a policy for the Service", grpc, Sources{Policies: []Policy{resolved(t, "whole", "epp", "", 0, "w.example")}}, "w.example whole"},
		{"a policy for the port beats an older one for the Service", grpc, Sources{Policies: []Policy{
			resolved(t, "whole", "epp", "", 0, "w.example"), resolved(t, "port", "epp", "grpc", time.Hour, "p.example")}}, "p.example port"},
		{"a policy for another port does not apply", grpc, Sources{Policies: []Policy{
			resolved(t, "other", "epp", "http", 0, "o.example"), resolved(t, "whole", "epp", "", time.Hour, "w.example")}}, "w.example whole"},
		{"an unnamed port gets only the Service's policy", unnamed, Sources{Policies: []Policy{
			resolved(t, "port", "epp", "grpc", 0, "p.example")}}, "plaintext"},
		{"of two for the port, the older", grpc, Sources{Policies: []Policy{
			resolved(t, "b-newer", "epp", "grpc", time.Hour, "n.example"), resolved(t, "z-older", "epp", "grpc", 0, "o.example")}}, "o.example z-older"},
		{"of two as old, by name", grpc, Sources{Policies: []Policy{
			resolved(t, "b", "epp", "grpc", 0, "b.example"), resolved(t, "a", "epp", "grpc", 0, "a.example")}}, "a.example a"},
		{"a policy for another Service does not apply", grpc, Sources{Policies: []Policy{resolved(t, "x", "other", "", 0, "x.example")}}, "plaintext"},
		{"the winning policy is invalid: a problem, never the valid newer one", grpc, Sources{Policies: []Policy{
			broken("older", "epp", "grpc", 0), resolved(t, "newer", "epp", "grpc", time.Hour, "n.example")}},
			`problem: BackendTLSPolicy apps/older is not accepted: spec.validation.caCertificateRefs[0]: ConfigMap "epp-ca" not found`},
		{"an invalid policy for the port over a valid one for the Service", grpc, Sources{Policies: []Policy{
			resolved(t, "whole", "epp", "", 0, "w.example"), broken("port", "epp", "grpc", time.Hour)}}, "problem: BackendTLSPolicy apps/port"},
		{"a DestinationRule without policies", grpc, Sources{Rules: []Rule{rule("dr", ns, "epp", 0, simple("dr.example"))}}, "dr.example dr"},
		{"a policy over a DestinationRule", grpc, Sources{Policies: []Policy{resolved(t, "p", "epp", "", time.Hour, "p.example")},
			Rules: []Rule{rule("dr", ns, "epp", 0, simple("dr.example"))}}, "p.example p"},
		{"an invalid policy never falls back to a DestinationRule", grpc, Sources{Policies: []Policy{broken("p", "epp", "", 0)},
			Rules: []Rule{rule("dr", ns, "epp", 0, &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, InsecureSkipVerify: true})}}, "problem: BackendTLSPolicy apps/p"},
		{"a rule in the Service's namespace over an older one elsewhere", grpc, Sources{Rules: []Rule{
			rule("dr", "istio-system", host("epp"), 0, simple("else.example")), rule("local", ns, "epp", time.Hour, simple("local.example"))}}, "local.example local"},
		{"of rules elsewhere, the older", grpc, Sources{Rules: []Rule{
			rule("a", "x", host("epp"), time.Hour, simple("a.example")), rule("b", "y", host("epp"), 0, simple("b.example"))}}, "b.example b"},
		{"a DISABLE rule: plaintext", grpc, Sources{Rules: []Rule{rule("dr", ns, "epp", 0, &kubelib.ClientTLS{Mode: kubelib.TLSModeDisable})}}, "plaintext"},
		{"a rule with a caCertificates path: a problem, not the system trust store", grpc, Sources{Rules: []Rule{
			rule("dr", ns, "epp", 0, &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, CACertificates: "/etc/certs/ca.pem"})}},
			`problem: DestinationRule apps/dr: spec.trafficPolicy.tls.caCertificates: "/etc/certs/ca.pem" is a file on the proxy`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Resolve(tc.port, tc.src)
			var got string
			switch {
			case r.Problem != "":
				if r.TLS != nil {
					t.Errorf("TLS %+v beside problem %q", r.TLS, r.Problem)
				}
				got = "problem: " + r.Problem
				if strings.HasPrefix(tc.want, "problem: ") && strings.Contains(got, tc.want) {
					return
				}
			case r.TLS == nil:
				got = "plaintext"
			default:
				got = r.TLS.SNI + " " + r.TLS.Source[strings.LastIndex(r.TLS.Source, "/")+1:]
				if r.TLS.Host != tc.port.Host {
					t.Errorf("Host %q, want the port's %q", r.TLS.Host, tc.port.Host)
				}
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestResolveCopies: the TLS Resolve returns is the port's own copy; the
// policy's is left as it was (a policy serves many ports).
func TestResolveCopies(t *testing.T) {
	p := resolved(t, "p", "epp", "", 0, "p.example")
	r := Resolve(Port{Service: key("epp"), Host: host("epp")}, Sources{Policies: []Policy{p}})
	if r.TLS == p.TLS || p.TLS.Host != "" || p.TLS.Source != "" {
		t.Errorf("the policy's TLS was shared or changed: %+v", p.TLS)
	}
}

// TestResolveRule: each DestinationRule TLS mode and CA source.
func TestResolveRule(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tls     *kubelib.ClientTLS
		want    *model.EPPTLS
		problem string
		warning string
	}{
		{name: "no tls"},
		{name: "DISABLE", tls: &kubelib.ClientTLS{Mode: kubelib.TLSModeDisable}},
		{name: "SIMPLE insecureSkipVerify (the seed)", tls: &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, InsecureSkipVerify: true},
			want: &model.EPPTLS{InsecureSkipVerify: true}},
		{name: "SIMPLE naming no CA: the system trust store, as Istio", tls: simple("epp.example.com"), want: &model.EPPTLS{SNI: "epp.example.com"}},
		{name: "SIMPLE with credentialName: read per Gateway namespace", tls: &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, CredentialName: "epp-ca"},
			want: &model.EPPTLS{CredentialName: "epp-ca"}},
		{name: "credentialName over caCertificates, as Istio", tls: &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, CredentialName: "epp-ca", CACertificates: "/x"},
			want: &model.EPPTLS{CredentialName: "epp-ca"}},
		{name: "insecureSkipVerify: no CA is read", tls: &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, CredentialName: "epp-ca", InsecureSkipVerify: true},
			want: &model.EPPTLS{InsecureSkipVerify: true}},
		{name: "a caCertificates path is a problem", tls: &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, CACertificates: "/etc/certs/ca.pem"},
			problem: "DestinationRule apps/dr: spec.trafficPolicy.tls.caCertificates"},
		{name: "SIMPLE with subjectAltNames", tls: &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, SubjectAltNames: []string{"a.example.com", "spiffe://x/y"}},
			want: &model.EPPTLS{SubjectAltNames: []string{"a.example.com", "spiffe://x/y"}}, warning: `"spiffe://x/y" is not a DNS name`},
		{name: "MUTUAL: TLS without the client certificate, never plaintext", tls: &kubelib.ClientTLS{Mode: kubelib.TLSModeMutual, SNI: "epp.example"},
			want: &model.EPPTLS{SNI: "epp.example"}, warning: "mode MUTUAL asks for a client certificate"},
		{name: "ISTIO_MUTUAL likewise", tls: &kubelib.ClientTLS{Mode: kubelib.TLSModeIstioMutual}, want: &model.EPPTLS{}, warning: "ISTIO_MUTUAL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rule("dr", ns, "epp", 0, tc.tls)
			if r.Host != host("epp") {
				t.Errorf("host %q", r.Host)
			}
			if d := cmp.Diff(tc.want, r.TLS); d != "" {
				t.Errorf("TLS (-want +got):\n%s", d)
			}
			if (tc.problem == "") != (r.Problem == "") || !strings.Contains(r.Problem, tc.problem) {
				t.Errorf("problem %q, want one containing %q", r.Problem, tc.problem)
			}
			if w := strings.Join(r.Warnings, "; "); (tc.warning == "") != (w == "") || !strings.Contains(w, tc.warning) {
				t.Errorf("warnings %q, want one containing %q", w, tc.warning)
			}
		})
	}
}

func TestDestinationRuleHost(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"epp", host("epp")},
		{host("epp"), host("epp")},
		{"epp." + ns, "epp." + ns}, // as Istio: dotted names are not expanded
		{"*." + ns + ".svc.cluster.local", ""},
		{"*", ""},
	} {
		if got := DestinationRuleHost(kubelib.DestinationRule{Namespace: ns, Name: "dr", Host: tc.host}, domain); got != tc.want {
			t.Errorf("DestinationRuleHost(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}

// TestCredentialCA: where and under which keys a credentialName's CA is
// read (Istio's: <name>-cacert first, then <name>; key cacert, then
// ca.crt; in the proxy's namespace), and every way it fails.
func TestCredentialCA(t *testing.T) {
	one, two := certs.CertPEM(t, "one"), certs.CertPEM(t, "two")
	secret := func(namespace, name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		secrets []*corev1.Secret
		want    string
		wantErr string
	}{
		{name: "key cacert of the Secret", secrets: []*corev1.Secret{secret("gw", "cred", map[string]string{"cacert": one, "ca.crt": two})}, want: one},
		{name: "key ca.crt when there is no cacert (a TLS Secret)", secrets: []*corev1.Secret{secret("gw", "cred", map[string]string{"tls.crt": two, "ca.crt": one})}, want: one},
		{name: "the -cacert Secret first", secrets: []*corev1.Secret{secret("gw", "cred", map[string]string{"cacert": two}),
			secret("gw", "cred-cacert", map[string]string{"ca.crt": one})}, want: one},
		{name: "a -cacert Secret without a CA does not fall back", secrets: []*corev1.Secret{secret("gw", "cred", map[string]string{"cacert": two}),
			secret("gw", "cred-cacert", map[string]string{"x": one})}, wantErr: "Secret gw/cred-cacert has no CA bundle"},
		{name: "only in another namespace: missing", secrets: []*corev1.Secret{secret("apps", "cred", map[string]string{"cacert": one})},
			wantErr: "neither Secret gw/cred-cacert nor gw/cred exists (the CA is read in the Gateway's namespace, gw)"},
		{name: "no CA keys", secrets: []*corev1.Secret{secret("gw", "cred", map[string]string{"key": "k", "cert": one})},
			wantErr: "Secret gw/cred has no CA bundle: neither key cacert nor ca.crt is set"},
		{name: "an empty cacert and no ca.crt", secrets: []*corev1.Secret{secret("gw", "cred", map[string]string{"cacert": ""})},
			wantErr: "has no CA bundle"},
		{name: "garbage in a CERTIFICATE block", secrets: []*corev1.Secret{secret("gw", "cred", map[string]string{"cacert": certs.NotACertificatePEM("x")})},
			wantErr: "key cacert of the Secret gw/cred: PEM block 1 is not a certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k types.NamespacedName) *corev1.Secret {
				for _, s := range tc.secrets {
					if s.Namespace == k.Namespace && s.Name == k.Name {
						return s
					}
				}
				return nil
			}
			got, err := CredentialCA("gw", "cred", lookup)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := CredentialCA("gw", "cred", nil); err == nil {
		t.Error("no Secrets at all: want an error")
	}
}

// TestResolveCredentialPerGateway: a credentialName rule resolves once per
// Gateway namespace; a namespace where the Secret is missing gets a problem
// (ProblemIn), the others the CA, and none the system trust store.
func TestResolveCredentialPerGateway(t *testing.T) {
	one := certs.CertPEM(t, "one")
	secrets := map[types.NamespacedName]*corev1.Secret{
		{Namespace: "gw-a", Name: "cred"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "gw-a", Name: "cred"}, Data: map[string][]byte{"cacert": []byte(one)}},
	}
	r := Resolve(Port{Service: key("epp"), Name: "grpc", Host: host("epp")}, Sources{
		Rules:             []Rule{rule("dr", ns, "epp", 0, &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, CredentialName: "cred"})},
		GatewayNamespaces: []string{"gw-a", "gw-b", "gw-a"},
		Secret:            func(k types.NamespacedName) *corev1.Secret { return secrets[k] },
	})
	if r.Problem != "" || r.TLS == nil {
		t.Fatalf("result %+v", r)
	}
	if p := r.ProblemIn("gw-a"); p != "" {
		t.Errorf("gw-a: %s", p)
	}
	if ca, ok, _ := r.TLS.CAFor("gw-a"); !ok || string(ca) != one {
		t.Errorf("gw-a CA %q, %v", ca, ok)
	}
	if p := r.ProblemIn("gw-b"); !strings.Contains(p, "DestinationRule apps/dr: spec.trafficPolicy.tls.credentialName: neither Secret gw-b/cred-cacert nor gw-b/cred exists") {
		t.Errorf("gw-b: %q", p)
	}
	if ca, ok, _ := r.TLS.CAFor("gw-b"); ok || ca != nil {
		t.Errorf("gw-b must get no CA, got %q", ca)
	}
	if _, ok, p := r.TLS.CAFor("gw-c"); ok || p == "" {
		t.Errorf("a namespace never resolved must not pass: %v %q", ok, p)
	}
}
