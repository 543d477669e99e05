// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/certs"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

func caConfigMap(t *testing.T, ns, name string) *corev1.ConfigMap {
	t.Helper()
	crt, _, err := certs.SelfSigned(name)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"ca.crt": string(crt)}}
}

func caRef(ns, kind, name string) gwv1.ObjectReference {
	r := gwv1.ObjectReference{Kind: gwv1.Kind(kind), Name: gwv1.ObjectName(name)}
	if ns != "" {
		r.Namespace = ptr.To(gwv1.Namespace(ns))
	}
	return r
}

// frontendGateway has HTTPS listeners on 443 (https) and 8443
// (https-8443, hostname b.example.com) and HTTP on 80, each HTTPS one with
// the Secret gw-ns/cert, and spec.tls.frontend with def as the default
// validation and perPort as the per-port ones.
func frontendGateway(def gwv1.FrontendTLSValidation, perPort map[gwv1.PortNumber]gwv1.FrontendTLSValidation) *gwv1.Gateway {
	https := func(name string, port gwv1.PortNumber, host string) gwv1.Listener {
		l := gwv1.Listener{Name: gwv1.SectionName(name), Port: port, Protocol: gwv1.HTTPSProtocolType,
			TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}
		if host != "" {
			l.Hostname = ptr.To(gwv1.Hostname(host))
		}
		return l
	}
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "gw-ns", Name: "gw"}, Spec: gwv1.GatewaySpec{
		Listeners: []gwv1.Listener{https("https", 443, ""), https("https-8443", 8443, "b.example.com"),
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
		TLS: &gwv1.GatewayTLSConfig{Frontend: &gwv1.FrontendTLSConfig{Default: gwv1.TLSConfig{Validation: &def}}},
	}}
	for port, v := range perPort {
		gw.Spec.TLS.Frontend.PerPort = append(gw.Spec.TLS.Frontend.PerPort, gwv1.TLSPortConfig{Port: port, TLS: gwv1.TLSConfig{Validation: &v}})
	}
	return gw
}

// TestFrontendClientValidation covers the Gateway API's rules for a
// Gateway's spec.tls.frontend (FrontendTLSValidation.caCertificateRefs and
// mode), as the conformance tests GatewayFrontendClientCertificateValidation,
// ...InsecureFallback, GatewayInvalidFrontendClientCertificateValidation and
// GatewayFrontendInvalidDefaultClientCertificateValidation check them: a
// per-port entry replaces the default for HTTPS listeners of its port; an
// invalid reference makes ResolvedRefs False with InvalidCACertificateKind,
// RefNotPermitted or InvalidCACertificateRef; when no reference resolves
// the listener is not accepted (NoValidCACertificate) and not served; HTTP
// listeners are never affected.
func TestFrontendClientValidation(t *testing.T) {
	cert := tlsSecret(t, "gw-ns", "cert")
	ca, perPortCA, otherNS := caConfigMap(t, "gw-ns", "ca"), caConfigMap(t, "gw-ns", "ca-8443"), caConfigMap(t, "cas", "shared")
	noKey := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gw-ns", Name: "nokey"}, Data: map[string]string{"other": "x"}}
	garbage := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gw-ns", Name: "garbage"}, Data: map[string]string{"ca.crt": "not a certificate"}}
	// A good certificate followed by a block Envoy cannot read: Envoy
	// would refuse the whole listener (and the Gateway's LDS update).
	halfBroken := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gw-ns", Name: "half-broken"},
		Data: map[string]string{"ca.crt": ca.Data["ca.crt"] + "-----BEGIN CERTIFICATE-----\n!!not base64!!\n-----END CERTIFICATE-----\n"}}
	cms := []*corev1.ConfigMap{ca, perPortCA, otherNS, noKey, garbage, halfBroken}
	lookups := func(grants []*gwv1.ReferenceGrant) CertificateLookups {
		lk := certLookups([]*corev1.Secret{cert}, grants)
		lk.ConfigMap = func(key types.NamespacedName) *corev1.ConfigMap {
			for _, cm := range cms {
				if cm.Namespace == key.Namespace && cm.Name == key.Name {
					return cm
				}
			}
			return nil
		}
		return lk
	}
	cmGrant := &gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "cas", Name: "g"}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: GatewayGroup, Kind: "Gateway", Namespace: "gw-ns"}},
		To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "ConfigMap"}},
	}}
	valid := func(refs ...gwv1.ObjectReference) gwv1.FrontendTLSValidation {
		return gwv1.FrontendTLSValidation{CACertificateRefs: refs}
	}
	// want is, per listener (https, https-8443, http): "" when accepted,
	// resolved and served, else "<Accepted reason>/<ResolvedRefs reason>"
	// with "-" for a condition that is True.
	type want [3]string
	cases := []struct {
		name     string
		gw       *gwv1.Gateway
		grants   []*gwv1.ReferenceGrant
		want     want
		ca       [2][]byte // the CA bundle each HTTPS listener validates with
		insecure [2]bool
	}{
		{name: "default and per port", gw: frontendGateway(valid(caRef("", "ConfigMap", "ca")),
			map[gwv1.PortNumber]gwv1.FrontendTLSValidation{8443: valid(caRef("", "ConfigMap", "ca-8443"))}),
			ca: [2][]byte{[]byte(ca.Data["ca.crt"]), []byte(perPortCA.Data["ca.crt"])}},
		{name: "AllowInsecureFallback per port", gw: frontendGateway(valid(caRef("", "ConfigMap", "ca")),
			map[gwv1.PortNumber]gwv1.FrontendTLSValidation{8443: {Mode: gwv1.AllowInsecureFallback, CACertificateRefs: []gwv1.ObjectReference{caRef("", "ConfigMap", "ca-8443")}}}),
			ca: [2][]byte{[]byte(ca.Data["ca.crt"]), []byte(perPortCA.Data["ca.crt"])}, insecure: [2]bool{false, true}},
		{name: "missing ConfigMap", gw: frontendGateway(valid(caRef("", "ConfigMap", "does-not-exist")), nil),
			want: want{"NoValidCACertificate/InvalidCACertificateRef", "NoValidCACertificate/InvalidCACertificateRef", ""}},
		{name: "no ca.crt", gw: frontendGateway(valid(caRef("", "ConfigMap", "nokey")), nil),
			want: want{"NoValidCACertificate/InvalidCACertificateRef", "NoValidCACertificate/InvalidCACertificateRef", ""}},
		{name: "not a certificate", gw: frontendGateway(valid(caRef("", "ConfigMap", "garbage")), nil),
			want: want{"NoValidCACertificate/InvalidCACertificateRef", "NoValidCACertificate/InvalidCACertificateRef", ""}},
		{name: "a good certificate, then a block that does not decode", gw: frontendGateway(valid(caRef("", "ConfigMap", "half-broken")), nil),
			want: want{"NoValidCACertificate/InvalidCACertificateRef", "NoValidCACertificate/InvalidCACertificateRef", ""}},
		{name: "a Service", gw: frontendGateway(valid(caRef("", "ConfigMap", "ca")),
			map[gwv1.PortNumber]gwv1.FrontendTLSValidation{8443: valid(caRef("", "Service", "ca"))}),
			want: want{"", "NoValidCACertificate/InvalidCACertificateKind", ""}, ca: [2][]byte{[]byte(ca.Data["ca.crt"])}},
		{name: "cross-namespace without grant", gw: frontendGateway(valid(caRef("cas", "ConfigMap", "shared")), nil),
			want: want{"NoValidCACertificate/RefNotPermitted", "NoValidCACertificate/RefNotPermitted", ""}},
		{name: "cross-namespace with grant", gw: frontendGateway(valid(caRef("cas", "ConfigMap", "shared")), nil),
			grants: []*gwv1.ReferenceGrant{cmGrant}, ca: [2][]byte{[]byte(otherNS.Data["ca.crt"]), []byte(otherNS.Data["ca.crt"])}},
		{name: "one of two resolves", gw: frontendGateway(valid(caRef("", "ConfigMap", "does-not-exist"), caRef("", "ConfigMap", "ca")), nil),
			want: want{"-/InvalidCACertificateRef", "-/InvalidCACertificateRef", ""}, ca: [2][]byte{[]byte(ca.Data["ca.crt"]), []byte(ca.Data["ca.crt"])}},
	}
	names := []string{"https", "https-8443", "http"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			view := NewGatewayView(tc.gw, lookups(tc.grants))
			st := GatewayStatus(view, nil, true, metav1.Time{})
			m := TranslatorGateway(*view, nil)
			for i, name := range names {
				accepted := findCondition(st.Listeners[i].Conditions, "Accepted")
				refs := findCondition(st.Listeners[i].Conditions, "ResolvedRefs")
				prog := findCondition(st.Listeners[i].Conditions, "Programmed")
				got := ""
				if accepted.Status != metav1.ConditionTrue || refs.Status != metav1.ConditionTrue {
					a, r := "-", "-"
					if accepted.Status != metav1.ConditionTrue {
						a = accepted.Reason
					}
					if refs.Status != metav1.ConditionTrue {
						r = refs.Reason
						if !strings.Contains(refs.Message, "caCertificateRefs") {
							t.Errorf("listener %s: ResolvedRefs message %q does not name the reference", name, refs.Message)
						}
					}
					got = a + "/" + r
				}
				if got != tc.want[i] {
					t.Errorf("listener %s: %q, want %q (Accepted %q, ResolvedRefs %q)", name, got, tc.want[i], accepted.Message, refs.Message)
				}
				served := false
				for _, ml := range m.Listeners {
					if ml.Name != name {
						continue
					}
					served = true
					if i == 2 {
						if ml.TLS != nil {
							t.Errorf("HTTP listener has TLS %+v", ml.TLS)
						}
						continue
					}
					cv := ml.TLS.ClientValidation
					switch {
					case tc.ca[i] == nil && cv != nil:
						t.Errorf("listener %s validates clients, want not served", name)
					case tc.ca[i] != nil && (cv == nil || !bytes.Equal(cv.CACertificates, tc.ca[i]) || cv.AllowInsecureFallback != tc.insecure[i]):
						t.Errorf("listener %s: validation %+v, want CA %q insecure %v", name, cv, tc.ca[i], tc.insecure[i])
					}
				}
				wantServed := !strings.HasPrefix(tc.want[i], "NoValid")
				if served != wantServed || (prog.Status == metav1.ConditionTrue) != wantServed {
					t.Errorf("listener %s: served %v, Programmed %s; want served %v", name, served, prog.Status, wantServed)
				}
			}
			insecure := findCondition(st.Conditions, string(gwv1.GatewayConditionInsecureFrontendValidationMode))
			wantInsecure := tc.insecure[0] || tc.insecure[1]
			if (insecure.Status == metav1.ConditionTrue) != wantInsecure ||
				(wantInsecure && insecure.Reason != string(gwv1.GatewayReasonConfigurationChanged)) {
				t.Errorf("InsecureFrontendValidationMode = %s/%s, want present %v", insecure.Status, insecure.Reason, wantInsecure)
			}
		})
	}
}

// TestFrontendValidationFollowsItsConfigMap runs the pipeline (Build): an
// HTTPS listener whose frontend CA ConfigMap is missing is not accepted
// and not served; it is served with the CA once the ConfigMap appears, and
// its bundle follows a change of the ConfigMap.
func TestFrontendValidationFollowsItsConfigMap(t *testing.T) {
	gw := seed.Gateway()
	gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{
		Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}},
	})
	gw.Spec.TLS = &gwv1.GatewayTLSConfig{Frontend: &gwv1.FrontendTLSConfig{Default: gwv1.TLSConfig{Validation: &gwv1.FrontendTLSValidation{
		CACertificateRefs: []gwv1.ObjectReference{caRef("", "ConfigMap", "client-ca")}}}}}
	p := newPipeline(t, false, seed.GatewayClassObject(), gw, tlsSecret(t, gw.Namespace, "cert"))
	key := gw.Namespace + "/" + gw.Name
	state := func() string {
		st := p.out.GatewayStatuses.GetKey(key)
		m := p.out.Translator.GetKey(key)
		if st == nil || m == nil || len(st.Status.Listeners) != 2 {
			return "no status"
		}
		ca := "none"
		var served []string
		for _, l := range m.Listeners {
			served = append(served, l.Name)
			if l.TLS != nil && l.TLS.ClientValidation != nil {
				ca = digest(string(l.TLS.ClientValidation.CACertificates))
			}
		}
		return fmt.Sprintf("accepted=%s served=%v ca=%s", findCondition(st.Status.Listeners[1].Conditions, "Accepted").Reason, served, ca)
	}
	expect := func(want string) {
		t.Helper()
		p.eventually(want, func() bool { return state() == want }, state)
	}
	expect("accepted=NoValidCACertificate served=[http] ca=none")
	cm := caConfigMap(t, gw.Namespace, "client-ca")
	p.add(cm)
	expect("accepted=Accepted served=[http https] ca=" + digest(cm.Data["ca.crt"]))
	cm2 := caConfigMap(t, gw.Namespace, "client-ca")
	if digest(cm2.Data["ca.crt"]) == digest(cm.Data["ca.crt"]) {
		t.Fatal("two new CAs are the same")
	}
	p.add(cm2)
	expect("accepted=Accepted served=[http https] ca=" + digest(cm2.Data["ca.crt"]))
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}
