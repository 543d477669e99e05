// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/certs"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

func tlsSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	crt, key, err := certs.SelfSigned(name)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
}

func certLookups(secrets []*corev1.Secret, grants []*gwv1.ReferenceGrant) CertificateLookups {
	return CertificateLookups{
		Secret: func(key types.NamespacedName) *corev1.Secret {
			for _, s := range secrets {
				if s.Namespace == key.Namespace && s.Name == key.Name {
					return s
				}
			}
			return nil
		},
		ReferenceGrants: func(ns string) []*gwv1.ReferenceGrant {
			var out []*gwv1.ReferenceGrant
			for _, g := range grants {
				if g.Namespace == ns {
					out = append(out, g)
				}
			}
			return out
		},
	}
}

// secretGrant lets Gateways of fromNS use Secrets in ns (all of them, or
// the one called name).
func secretGrant(ns, fromNS string, name *string) *gwv1.ReferenceGrant {
	return &gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: GatewayGroup, Kind: "Gateway", Namespace: gwv1.Namespace(fromNS)}},
		To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Secret", Name: (*gwv1.ObjectName)(name)}},
	}}
}

// TestCertificateRefs covers the Gateway API's rules for an HTTPS
// listener's certificateRef (GatewayTLSConfig.certificateRefs and the
// listener's ResolvedRefs reasons), as the conformance tests
// GatewayInvalidTLSConfiguration and GatewaySecret*ReferenceGrant* check
// them: the listener stays Accepted, ResolvedRefs says why, and it is
// served only when the reference resolves.
func TestCertificateRefs(t *testing.T) {
	good := tlsSecret(t, "gw-ns", "cert")
	other := tlsSecret(t, "certs", "shared")
	otherB := tlsSecret(t, "certs", "other")
	opaque := tlsSecret(t, "gw-ns", "opaque")
	opaque.Type = corev1.SecretTypeOpaque
	noKey := tlsSecret(t, "gw-ns", "nokey")
	delete(noKey.Data, corev1.TLSPrivateKeyKey)
	malformed := tlsSecret(t, "gw-ns", "malformed")
	malformed.Data[corev1.TLSCertKey] = []byte("not a certificate")
	mismatched := tlsSecret(t, "gw-ns", "mismatched")
	mismatched.Data[corev1.TLSPrivateKeyKey] = tlsSecret(t, "x", "y").Data[corev1.TLSPrivateKeyKey]
	secrets := []*corev1.Secret{good, other, otherB, opaque, noKey, malformed, mismatched}

	ref := func(ns, name string) gwv1.SecretObjectReference {
		r := gwv1.SecretObjectReference{Name: gwv1.ObjectName(name)}
		if ns != "" {
			r.Namespace = ptr.To(gwv1.Namespace(ns))
		}
		return r
	}
	cases := []struct {
		name    string
		ref     gwv1.SecretObjectReference
		grants  []*gwv1.ReferenceGrant
		reason  gwv1.ListenerConditionReason // "" when it resolves
		message string                       // a part of the message
	}{
		{name: "same namespace", ref: ref("", "cert")},
		{name: "group and kind spelled out", ref: gwv1.SecretObjectReference{Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Secret")), Name: "cert"}},
		{name: "missing", ref: ref("", "nonexistent"), reason: gwv1.ListenerReasonInvalidCertificateRef, message: "does not exist"},
		{name: "wrong group", ref: gwv1.SecretObjectReference{Group: ptr.To(gwv1.Group("wrong.group.company.io")), Name: "cert"},
			reason: gwv1.ListenerReasonInvalidCertificateRef, message: "only core Secrets"},
		{name: "wrong kind", ref: gwv1.SecretObjectReference{Kind: ptr.To(gwv1.Kind("WrongKind")), Name: "cert"},
			reason: gwv1.ListenerReasonInvalidCertificateRef, message: "only core Secrets"},
		{name: "not kubernetes.io/tls", ref: ref("", "opaque"), reason: gwv1.ListenerReasonInvalidCertificateRef, message: `type is "Opaque"`},
		{name: "no tls.key", ref: ref("", "nokey"), reason: gwv1.ListenerReasonInvalidCertificateRef, message: "no tls.key"},
		{name: "malformed", ref: ref("", "malformed"), reason: gwv1.ListenerReasonInvalidCertificateRef, message: "not a valid certificate"},
		{name: "key of another certificate", ref: ref("", "mismatched"), reason: gwv1.ListenerReasonInvalidCertificateRef, message: "not a valid certificate"},
		{name: "cross-namespace without grant", ref: ref("certs", "shared"), reason: gwv1.ListenerReasonRefNotPermitted, message: "no ReferenceGrant"},
		{name: "cross-namespace, grant for all Secrets", ref: ref("certs", "shared"), grants: []*gwv1.ReferenceGrant{secretGrant("certs", "gw-ns", nil)}},
		{name: "cross-namespace, grant for this Secret", ref: ref("certs", "shared"), grants: []*gwv1.ReferenceGrant{secretGrant("certs", "gw-ns", ptr.To("shared"))}},
		{name: "cross-namespace, grant for another Secret", ref: ref("certs", "shared"),
			grants: []*gwv1.ReferenceGrant{secretGrant("certs", "gw-ns", ptr.To("other"))}, reason: gwv1.ListenerReasonRefNotPermitted},
		{name: "cross-namespace, grant from another namespace", ref: ref("certs", "shared"),
			grants: []*gwv1.ReferenceGrant{secretGrant("certs", "elsewhere", nil)}, reason: gwv1.ListenerReasonRefNotPermitted},
		{name: "cross-namespace, grant in the wrong namespace", ref: ref("certs", "shared"),
			grants: []*gwv1.ReferenceGrant{secretGrant("gw-ns", "gw-ns", nil)}, reason: gwv1.ListenerReasonRefNotPermitted},
		// Not permitted wins: nothing is said about a Secret the Gateway may not use.
		{name: "cross-namespace missing without grant", ref: ref("certs", "nonexistent"), reason: gwv1.ListenerReasonRefNotPermitted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "gw-ns", Name: "gw"}, Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{{
				Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname("a.example.com")),
				TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{tc.ref}},
			}}}}
			view := NewGatewayView(gw, certLookups(secrets, tc.grants))
			l := view.Listeners[0]
			if !l.Accepted {
				t.Fatalf("listener not accepted: %s: %s", l.Reason, l.Message)
			}
			st := GatewayStatus(view, nil, true, metav1.Time{})
			if c := findCondition(st.Conditions, "Accepted"); c.Status != metav1.ConditionTrue {
				t.Errorf("Gateway Accepted = %s/%s, want True", c.Status, c.Reason)
			}
			refs := findCondition(st.Listeners[0].Conditions, "ResolvedRefs")
			prog := findCondition(st.Listeners[0].Conditions, "Programmed")
			if tc.reason == "" {
				if !l.ResolvedRefs || !l.Served() || refs.Status != metav1.ConditionTrue || prog.Status != metav1.ConditionTrue {
					t.Fatalf("want resolved and programmed; ResolvedRefs %s/%s %q, Programmed %s/%s", refs.Status, refs.Reason, refs.Message, prog.Status, prog.Reason)
				}
				m := TranslatorGateway(*view, nil)
				if len(m.Listeners) != 1 || m.Listeners[0].TLS == nil || m.Listeners[0].TLS.CertificateRefs[0] != l.Certificate.String() {
					t.Fatalf("translator listeners = %+v, want the HTTPS listener with Secret %s", m.Listeners, l.Certificate)
				}
				return
			}
			if l.ResolvedRefs || l.Served() || refs.Status != metav1.ConditionFalse || refs.Reason != string(tc.reason) ||
				!strings.Contains(refs.Message, tc.message) {
				t.Errorf("ResolvedRefs = %s/%s %q, want False/%s containing %q", refs.Status, refs.Reason, refs.Message, tc.reason, tc.message)
			}
			if prog.Status != metav1.ConditionFalse || prog.Reason != string(gwv1.ListenerReasonInvalid) {
				t.Errorf("Programmed = %s/%s, want False/Invalid", prog.Status, prog.Reason)
			}
			if m := TranslatorGateway(*view, nil); len(m.Listeners) != 0 {
				t.Errorf("a listener without a usable certificate reaches the translator: %+v", m.Listeners)
			}
			if strings.Contains(refs.Message, "PRIVATE KEY") || strings.Contains(refs.Message, "-----") {
				t.Errorf("message quotes key material: %q", refs.Message)
			}
		})
	}
}

func findCondition(cs []metav1.Condition, typ string) metav1.Condition {
	return ptr.Deref(meta.FindStatusCondition(cs, typ), metav1.Condition{})
}

// TestHTTPSListenerFollowsItsInputs runs the pipeline (Build): a
// cross-namespace certificateRef is RefNotPermitted until a ReferenceGrant
// appears, then InvalidCertificateRef while the Secret is missing, then
// resolved and served once the Secret exists; removing the grant takes it
// away again. The Gateway stays Accepted throughout, and its HTTP
// listener is served throughout.
func TestHTTPSListenerFollowsItsInputs(t *testing.T) {
	gw := seed.Gateway()
	gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{
		Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname("a.example.com")),
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Namespace: ptr.To(gwv1.Namespace("certs")), Name: "shared"}}},
	})
	p := newPipeline(t, false, seed.GatewayClassObject(), gw)
	key := gw.Namespace + "/" + gw.Name
	state := func() string {
		st := p.out.GatewayStatuses.GetKey(key)
		m := p.out.Models.GetKey(key)
		if st == nil || m == nil || len(st.Status.Listeners) != 2 {
			return "no status"
		}
		var served []string
		for _, l := range m.Listeners {
			served = append(served, l.Name)
		}
		refs := findCondition(st.Status.Listeners[1].Conditions, "ResolvedRefs")
		return fmt.Sprintf("accepted=%s refs=%s/%s served=%v", findCondition(st.Status.Conditions, "Accepted").Status,
			refs.Status, refs.Reason, served)
	}
	expect := func(want string) {
		t.Helper()
		p.eventually(want, func() bool { return state() == want }, state)
	}
	expect("accepted=True refs=False/RefNotPermitted served=[http]")
	grant := secretGrant("certs", gw.Namespace, nil)
	p.add(grant)
	expect("accepted=True refs=False/InvalidCertificateRef served=[http]")
	p.add(tlsSecret(t, "certs", "shared"))
	expect("accepted=True refs=True/ResolvedRefs served=[http https]")
	if m := p.out.Models.GetKey(key); m.Listeners[1].TLS.CertificateRefs[0] != "certs/shared" {
		t.Errorf("translator certificate %v", m.Listeners[1].TLS.CertificateRefs)
	}
	p.grants.DeleteObject(grant.Namespace + "/" + grant.Name)
	expect("accepted=True refs=False/RefNotPermitted served=[http]")
}
