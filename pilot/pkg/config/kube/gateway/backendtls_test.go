// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/seed"
)

// garbageCertPEM is a PEM CERTIFICATE block whose contents are not a
// certificate: Envoy would refuse it as trusted_ca, and with it the whole
// CDS update of the Gateway.
var garbageCertPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not a certificate")}))

func backendTLSPolicy(name string, created time.Time, section, caKind, caName string) *gwv1.BackendTLSPolicy {
	target := gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: "tls-backend"}}
	if section != "" {
		target.SectionName = ptr.To(gwv1.SectionName(section))
	}
	return &gwv1.BackendTLSPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Generation: 3, CreationTimestamp: metav1.NewTime(created)},
		Spec: gwv1.BackendTLSPolicySpec{
			TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{target},
			Validation: gwv1.BackendTLSPolicyValidation{
				CACertificateRefs: []gwv1.LocalObjectReference{{Kind: gwv1.Kind(caKind), Name: gwv1.ObjectName(caName)}},
				Hostname:          "abc.example.com",
			},
		},
	}
}

// TestBackendTLSPolicyForServices runs the pipeline (Build) with a route
// sending /a to port btls (443) and /b to port other (8443) of Service
// apps/tls-backend, and checks the Gateway API's BackendTLSPolicy rules as
// the conformance tests BackendTLSPolicy, ...ConflictResolution,
// ...InvalidCACertificateRef and ...InvalidKind check them: a policy naming
// the port wins over one naming the Service; of two naming the same port
// the older wins and the other is Accepted=False/Conflicted; an invalid
// policy (a CA kind other than ConfigMap, a missing ConfigMap) is
// Accepted=False/NoValidCACertificate with ResolvedRefs=False/InvalidKind or
// InvalidCACertificateRef, and the ports it applies to are invalid backends
// (500, never plaintext) with the route ResolvedRefs=False/InvalidBackendTLS
// naming the policy; status.ancestors names the Gateway the route attaches
// to, with the policy's generation; a CA ConfigMap's change follows.
func TestBackendTLSPolicyForServices(t *testing.T) {
	gw := seed.Gateway()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "tls-backend"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "btls", Port: 443}, {Name: "other", Port: 8443}}}}
	backendRef := func(port int32) gwv1.HTTPBackendRef {
		return gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Name: "tls-backend", Port: ptr.To(gwv1.PortNumber(port))}}}
	}
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: ptr.To(gwv1.Namespace(gw.Namespace)), Name: gwv1.ObjectName(gw.Name)}}},
		Rules: []gwv1.HTTPRouteRule{
			{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Value: ptr.To("/a")}}}, BackendRefs: []gwv1.HTTPBackendRef{backendRef(443)}},
			{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Value: ptr.To("/b")}}}, BackendRefs: []gwv1.HTTPBackendRef{backendRef(8443)}},
		},
	}}
	ca := caConfigMap(t, "apps", "ca")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	older := backendTLSPolicy("older", t0, "btls", "ConfigMap", "ca")
	newer := backendTLSPolicy("newer", t0.Add(time.Hour), "btls", "ConfigMap", "ca")
	whole := backendTLSPolicy("whole", t0, "", "Secret", "ca")
	p := newPipeline(t, false, seed.GatewayClassObject(), gw, svc, route, ca, older, newer, whole)
	gwKey := gw.Namespace + "/" + gw.Name

	// backends is each rule's Service TLS as "<SNI>" or "problem".
	backends := func() string {
		m := p.out.Translator.GetKey(gwKey)
		if m == nil || len(m.Listeners) != 1 || len(m.Listeners[0].Routes) != 1 {
			return "no route"
		}
		var out []string
		for _, rule := range m.Listeners[0].Routes[0].Rules {
			b := rule.Backends[0]
			sb := b.Service
			switch {
			case b.Invalid != "" && sb == nil:
				out = append(out, "problem")
			case sb == nil:
				out = append(out, "none")
			case sb.TLS != nil:
				out = append(out, fmt.Sprintf("%s(%s)", sb.TLS.SNI, sb.TLS.Source[strings.LastIndex(sb.TLS.Source, "/")+1:]))
			default:
				out = append(out, "plaintext")
			}
		}
		return strings.Join(out, ",")
	}
	status := func(name string) string {
		st := p.out.BackendTLSPolicyStatuses.GetKey("apps/" + name)
		if st == nil {
			return "none"
		}
		var out []string
		for _, a := range st.Parents {
			s := fmt.Sprintf("%s/%s:", *a.AncestorRef.Namespace, a.AncestorRef.Name)
			for _, c := range a.Conditions {
				s += fmt.Sprintf(" %s=%s/%s@%d", c.Type, c.Status, c.Reason, c.ObservedGeneration)
			}
			out = append(out, s)
		}
		return strings.Join(out, "; ")
	}
	expect := func(what string, got func() string, want string) {
		t.Helper()
		p.eventually(what, func() bool { return got() == want }, got)
	}
	expect("backends", backends, "abc.example.com(older),problem")
	routeRefs := func() string {
		st := p.routeStatus("apps", "r")
		if len(st) != 1 {
			return "no status"
		}
		c := findCondition(st[0].Conditions, "ResolvedRefs")
		return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
	}
	expect("route ResolvedRefs", routeRefs, "False/InvalidBackendTLS: Service apps/tls-backend port 8443: BackendTLSPolicy apps/whole is not accepted: "+
		`spec.validation.caCertificateRefs[0]: kind "Secret" in group "" is not supported (only ConfigMap); its requests are answered 500, never sent without TLS`)
	anc := gwKey + ":"
	expect("older", func() string { return status("older") }, anc+" Accepted=True/Accepted@3 ResolvedRefs=True/ResolvedRefs@3")
	expect("newer", func() string { return status("newer") }, anc+" Accepted=False/Conflicted@3 ResolvedRefs=True/ResolvedRefs@3")
	expect("whole", func() string { return status("whole") }, anc+" Accepted=False/NoValidCACertificate@3 ResolvedRefs=False/InvalidKind@3")

	// The CA ConfigMap loses its certificate: both port policies are invalid.
	p.add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ca"}, Data: map[string]string{"ca.crt": ""}})
	expect("older without its CA", func() string { return status("older") },
		anc+" Accepted=False/NoValidCACertificate@3 ResolvedRefs=False/InvalidCACertificateRef@3")
	expect("backends without the CA", backends, "problem,problem")
	// A bundle that is a CERTIFICATE block with garbage inside is not a CA.
	p.add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ca"}, Data: map[string]string{"ca.crt": garbageCertPEM}})
	expect("older with garbage for a CA", func() string { return status("older") },
		anc+" Accepted=False/NoValidCACertificate@3 ResolvedRefs=False/InvalidCACertificateRef@3")
	expect("backends with garbage for a CA", backends, "problem,problem")
	p.add(ca)
	expect("backends with the CA again", backends, "abc.example.com(older),problem")
	expect("route ResolvedRefs with the CA again", func() string { return routeRefs()[:strings.Index(routeRefs(), ":")] }, "False/InvalidBackendTLS")

	// Without the port policies, the Service's policy applies to both ports;
	// a valid one gives both TLS.
	p.policies.DeleteObject("apps/older")
	p.policies.DeleteObject("apps/newer")
	p.add(backendTLSPolicy("whole", t0, "", "ConfigMap", "ca"))
	expect("backends from the Service's policy", backends, "abc.example.com(whole),abc.example.com(whole)")
	expect("route ResolvedRefs with valid policies", routeRefs, "True/ResolvedRefs: all references resolved")

	// A sectionName the Service has no port of attaches to nothing (the
	// Gateway API: the policy must fail to attach, and say so): with
	// another target that attaches, it is named in the message; alone, the
	// policy is Accepted=False/TargetNotFound and the ports stay as they
	// were (the Service's policy wins them).
	typo := backendTLSPolicy("typo", t0.Add(-time.Hour), "btsl", "ConfigMap", "ca")
	p.add(typo)
	expect("typo alone", func() string { return status("typo") }, anc+" Accepted=False/TargetNotFound@3 ResolvedRefs=True/ResolvedRefs@3")
	msg := func() string {
		st := p.out.BackendTLSPolicyStatuses.GetKey("apps/typo")
		if st == nil || len(st.Parents) == 0 {
			return ""
		}
		return findCondition(st.Parents[0].Conditions, "Accepted").Message
	}
	if want := `no targetRef attaches: Service apps/tls-backend has no port named "btsl" (sectionName); the policy applies to no port`; msg() != want {
		t.Errorf("typo's Accepted message %q, want %q", msg(), want)
	}
	expect("backends with the typo", backends, "abc.example.com(whole),abc.example.com(whole)")
	typo.Spec.TargetRefs = append(typo.Spec.TargetRefs, gwv1.LocalPolicyTargetReferenceWithSectionName{
		LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: "tls-backend"}, SectionName: ptr.To(gwv1.SectionName("other"))})
	p.add(typo)
	expect("typo beside a port that exists", func() string { return status("typo") }, anc+" Accepted=True/Accepted@3 ResolvedRefs=True/ResolvedRefs@3")
	if !strings.Contains(msg(), `these targetRefs attach to nothing: Service apps/tls-backend has no port named "btsl"`) {
		t.Errorf("typo's Accepted message %q does not name the target that attaches to nothing", msg())
	}
	expect("backends with the typo's port", backends, "abc.example.com(whole),abc.example.com(typo)")
	p.policies.DeleteObject("apps/typo")

	// A policy for a Service no route uses has no ancestors.
	unused := backendTLSPolicy("unused", t0, "", "ConfigMap", "ca")
	unused.Spec.TargetRefs[0].Name = "elsewhere"
	p.add(unused)
	expect("whole still", func() string { return status("whole") }, anc+" Accepted=True/Accepted@3 ResolvedRefs=True/ResolvedRefs@3")
	if s := status("unused"); s != "none" {
		t.Errorf("unused policy has ancestors: %s", s)
	}
}

// TestGatewayBackendClientCertificate covers spec.tls.backend.clientCertificateRef
// as the conformance tests GatewayTLSBackendClientCertificate and
// GatewayInvalidTLSBackendConfiguration check it: a reference that resolves
// makes the Gateway ResolvedRefs=True and reaches the translator; a
// missing or malformed Secret, another group or kind is
// ResolvedRefs=False/InvalidClientCertificateRef, another namespace without
// a ReferenceGrant RefNotPermitted; the Gateway stays Accepted.
func TestGatewayBackendClientCertificate(t *testing.T) {
	good, other := tlsSecret(t, "gw-ns", "client"), tlsSecret(t, "certs", "client")
	malformed := tlsSecret(t, "gw-ns", "malformed")
	malformed.Data[corev1.TLSCertKey] = []byte("not a certificate")
	secrets := []*corev1.Secret{good, other, malformed}
	ref := func(ns, group, kind, name string) *gwv1.SecretObjectReference {
		r := &gwv1.SecretObjectReference{Group: ptr.To(gwv1.Group(group)), Kind: ptr.To(gwv1.Kind(kind)), Name: gwv1.ObjectName(name)}
		if ns != "" {
			r.Namespace = ptr.To(gwv1.Namespace(ns))
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		ref    *gwv1.SecretObjectReference
		grants []*gwv1.ReferenceGrant
		want   string // the Gateway's ResolvedRefs, "" for none
		secret string // the translator's BackendClientCertificate
	}{
		{"unset", nil, nil, "", ""},
		{"resolves", ref("", "", "Secret", "client"), nil, "True/ResolvedRefs", "gw-ns/client"},
		{"missing", ref("", "", "Secret", "nonexistent"), nil, "False/InvalidClientCertificateRef", ""},
		{"malformed", ref("", "", "Secret", "malformed"), nil, "False/InvalidClientCertificateRef", ""},
		{"another group", ref("", "wrong.group.company.io", "Secret", "client"), nil, "False/InvalidClientCertificateRef", ""},
		{"another kind", ref("", "", "WrongKind", "client"), nil, "False/InvalidClientCertificateRef", ""},
		{"another namespace without grant", ref("certs", "", "Secret", "client"), nil, "False/RefNotPermitted", ""},
		{"another namespace with grant", ref("certs", "", "Secret", "client"), []*gwv1.ReferenceGrant{secretGrant("certs", "gw-ns", nil)},
			"True/ResolvedRefs", "certs/client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "gw-ns", Name: "gw"}, Spec: gwv1.GatewaySpec{
				Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}
			if tc.ref != nil {
				gw.Spec.TLS = &gwv1.GatewayTLSConfig{Backend: &gwv1.GatewayBackendTLS{ClientCertificateRef: tc.ref}}
			}
			view := NewGatewayView(gw, certLookups(secrets, tc.grants))
			st := GatewayStatus(view, nil, true, metav1.Time{})
			got := ""
			if c := findCondition(st.Conditions, "ResolvedRefs"); c.Type != "" {
				got = string(c.Status) + "/" + c.Reason
				if c.Status != metav1.ConditionTrue && !strings.Contains(c.Message, "clientCertificateRef") {
					t.Errorf("message %q does not name the field", c.Message)
				}
			}
			if got != tc.want {
				t.Errorf("ResolvedRefs %q, want %q", got, tc.want)
			}
			if a := findCondition(st.Conditions, "Accepted"); a.Status != metav1.ConditionTrue {
				t.Errorf("Accepted %s/%s, want True", a.Status, a.Reason)
			}
			if m := TranslatorGateway(*view, nil); m.BackendClientCertificate != tc.secret {
				t.Errorf("translator client certificate %q, want %q", m.BackendClientCertificate, tc.secret)
			}
		})
	}
}
