// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// eppPolicy is a BackendTLSPolicy on the seed's EPP Service (its port
// section, "" for the whole Service), SNI sni, CA from caKind/caName.
func eppPolicy(name string, created time.Time, section, sni, caKind, caName string) *gwv1.BackendTLSPolicy {
	p := backendTLSPolicy(name, created, section, caKind, caName)
	p.Namespace = seed.Namespace
	p.Spec.TargetRefs[0].Name = seed.EPPName
	p.Spec.Validation.Hostname = gwv1.PreciseHostname(sni)
	return p
}

// eppRule is a DestinationRule on the seed's EPP host with client TLS t.
func eppRule(name string, t *kubelib.ClientTLS) kubelib.DestinationRule {
	return kubelib.DestinationRule{Namespace: seed.Namespace, Name: name, Host: seed.EPPName, TLS: t}
}

// namedEPPService is the seed's EPP Service with its port named grpc (so
// a policy can name it in sectionName).
func namedEPPService() *corev1.Service {
	s := seed.EPPService()
	s.Spec.Ports[0].Name = "grpc"
	return s
}

func credentialSecret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// TestUpstreamTLSForEPPs runs the pipeline on the seed (a FailOpen pool)
// with each TLS setting of its EPP, and checks the one resolution and its
// fail-closed rule as they reach the EPP: the model (the pool backend's
// EPP TLS, or an invalid backend), the route's ResolvedRefs, the pool's
// ResolvedRefs, and the BackendTLSPolicy's conditions on the Gateway's
// ancestor entry. Before the resolution was shared, an invalid policy on
// an EPP Service was left out with a log line: the EPP was reached in
// plaintext, with every status True.
func TestUpstreamTLSForEPPs(t *testing.T) {
	caCM := caConfigMap(t, seed.Namespace, "ca")
	caPEM := caCM.Data["ca.crt"]
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	simpleCred := &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, CredentialName: "epp-ca"}
	for _, tc := range []struct {
		name string
		objs []any
		// epp is the model's EPP TLS: "plaintext", "invalid", or
		// "<sni>(<source name>)", "+ca" when a CA is inlined for the
		// Gateway, "+insecure" without verification.
		epp string
		// route and pool are the ResolvedRefs "<status>/<reason>", with
		// ": <part of the message>" when False.
		route, pool string
		// policy is the named policy's conditions on the Gateway's ancestor
		// entry ("" when the case has none).
		policy string
	}{
		{name: "nothing: plaintext", epp: "plaintext", route: "True/ResolvedRefs", pool: "True/ResolvedRefs"},
		{name: "the seed's DestinationRule", objs: []any{eppRule("epp", &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, InsecureSkipVerify: true})},
			epp: "(epp)+insecure", route: "True/ResolvedRefs", pool: "True/ResolvedRefs"},
		{name: "a policy on the EPP Service, over a DestinationRule", objs: []any{caCM, eppPolicy("p", t0, "", "epp.example.com", "ConfigMap", "ca"),
			eppRule("epp", &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, InsecureSkipVerify: true})},
			epp: "epp.example.com(p)+ca", route: "True/ResolvedRefs", pool: "True/ResolvedRefs",
			policy: "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
		{name: "a policy naming the EPP port wins over an older one for the Service", objs: []any{caCM,
			eppPolicy("whole", t0, "", "whole.example.com", "ConfigMap", "ca"), eppPolicy("port", t0.Add(time.Hour), "grpc", "port.example.com", "ConfigMap", "ca")},
			epp: "port.example.com(port)+ca", route: "True/ResolvedRefs", pool: "True/ResolvedRefs"},
		{name: "a policy naming another port does not apply", objs: []any{caCM,
			eppPolicy("other", t0, "metrics", "other.example.com", "ConfigMap", "ca"), eppPolicy("whole", t0.Add(time.Hour), "", "whole.example.com", "ConfigMap", "ca")},
			epp: "whole.example.com(whole)+ca", route: "True/ResolvedRefs", pool: "True/ResolvedRefs"},
		{name: "of two policies for the EPP port, the older; the other Conflicted", objs: []any{caCM,
			eppPolicy("b-old", t0, "grpc", "old.example.com", "ConfigMap", "ca"), eppPolicy("a-new", t0.Add(time.Hour), "grpc", "new.example.com", "ConfigMap", "ca")},
			epp: "old.example.com(b-old)+ca", route: "True/ResolvedRefs", pool: "True/ResolvedRefs"},
		{name: "missing CA ConfigMap: invalid, never plaintext", objs: []any{eppPolicy("p", t0, "", "epp.example.com", "ConfigMap", "absent")},
			epp: "invalid", route: `False/InvalidBackendTLS: InferencePool llm-namespace/vllm-llama3-8b: Endpoint Picker Service llm-namespace/vllm-llama3-8b-epp port 9002: BackendTLSPolicy llm-namespace/p is not accepted: spec.validation.caCertificateRefs[0]: ConfigMap "absent" not found`,
			pool:   `False/InvalidExtensionRef: BackendTLSPolicy llm-namespace/p is not accepted`,
			policy: "Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidCACertificateRef"},
		{name: "a CA of the wrong kind", objs: []any{eppPolicy("p", t0, "", "epp.example.com", "Secret", "ca")},
			epp: "invalid", route: `False/InvalidBackendTLS: kind "Secret"`, pool: `False/InvalidExtensionRef: kind "Secret"`,
			policy: "Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidKind"},
		{name: "garbage in a CERTIFICATE block", objs: []any{eppPolicy("p", t0, "", "epp.example.com", "ConfigMap", "bad"),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "bad"}, Data: map[string]string{"ca.crt": garbageCertPEM}}},
			epp: "invalid", route: "False/InvalidBackendTLS: PEM block 1 is not a certificate", pool: "False/InvalidExtensionRef: PEM block 1 is not a certificate",
			policy: "Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidCACertificateRef"},
		{name: "an invalid policy does not fall back to a DestinationRule", objs: []any{eppPolicy("p", t0, "", "epp.example.com", "ConfigMap", "absent"),
			eppRule("epp", &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, InsecureSkipVerify: true})},
			epp: "invalid", route: "False/InvalidBackendTLS", pool: "False/InvalidExtensionRef", policy: "Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidCACertificateRef"},
		{name: "credentialName Secret in the Gateway's namespace", objs: []any{eppRule("epp", simpleCred),
			credentialSecret(seed.GatewayNamespace, "epp-ca", map[string]string{"cacert": caPEM})},
			epp: "(epp)+ca", route: "True/ResolvedRefs", pool: "True/ResolvedRefs"},
		{name: "credentialName Secret missing: not the system trust store", objs: []any{eppRule("epp", simpleCred),
			credentialSecret(seed.Namespace, "epp-ca", map[string]string{"cacert": caPEM})}, // the rule's namespace is not the proxy's
			epp:   "(epp)+no CA for the Gateway",
			route: "False/InvalidBackendTLS: InferencePool llm-namespace/vllm-llama3-8b: Endpoint Picker Service llm-namespace/vllm-llama3-8b-epp port 9002: DestinationRule llm-namespace/epp: spec.trafficPolicy.tls.credentialName: neither Secret gateway-namespace/epp-ca-cacert nor gateway-namespace/epp-ca exists",
			pool:  "False/InvalidExtensionRef: DestinationRule llm-namespace/epp: spec.trafficPolicy.tls.credentialName: neither Secret"},
		{name: "credentialName Secret without a CA", objs: []any{eppRule("epp", simpleCred),
			credentialSecret(seed.GatewayNamespace, "epp-ca", map[string]string{"cert": caPEM})},
			epp: "(epp)+no CA for the Gateway", route: "False/InvalidBackendTLS: neither key cacert nor ca.crt is set", pool: "False/InvalidExtensionRef: neither key cacert"},
		{name: "a caCertificates path", objs: []any{eppRule("epp", &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, CACertificates: "/etc/ca.pem"})},
			epp: "invalid", route: "False/InvalidBackendTLS: spec.trafficPolicy.tls.caCertificates", pool: "False/InvalidExtensionRef: spec.trafficPolicy.tls.caCertificates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []any{seed.GatewayClassObject(), seed.Gateway(), seed.HTTPRoute(), seed.InferencePool(), namedEPPService()}
			p := newPipeline(t, true, append(objs, tc.objs...)...)
			gwKey := seed.GatewayNamespace + "/" + seed.GatewayName
			eppTLS := func() string {
				m := p.out.Translator.GetKey(gwKey)
				if m == nil || len(m.Listeners) != 1 || len(m.Listeners[0].Routes) != 1 {
					return "no route"
				}
				b := m.Listeners[0].Routes[0].Rules[0].Backends[0]
				switch {
				case b.Invalid != "":
					return "invalid"
				case b.Pool == nil || b.Pool.EPP == nil:
					return "no pool"
				case b.Pool.EPP.TLS == nil:
					return "plaintext"
				}
				tls := b.Pool.EPP.TLS
				s := fmt.Sprintf("%s(%s)", tls.SNI, tls.Source[strings.LastIndex(tls.Source, "/")+1:])
				switch ca, ok, _ := tls.CAFor(seed.GatewayNamespace); {
				case !ok:
					s += "+no CA for the Gateway"
				case len(ca) > 0:
					s += "+ca"
				case tls.InsecureSkipVerify:
					s += "+insecure"
				}
				return s
			}
			matches := func(got, want string) bool {
				w, msg, _ := strings.Cut(want, ": ")
				g, gotMsg, _ := strings.Cut(got, ": ")
				return g == w && strings.Contains(gotMsg, msg)
			}
			routeRefs := func() string {
				st := p.routeStatus(seed.Namespace, seed.RouteName)
				if len(st) != 1 {
					return "no status"
				}
				c := findCondition(st[0].Conditions, "ResolvedRefs")
				return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
			}
			poolRefs := func() string {
				st := p.poolStatus(seed.Namespace, seed.PoolName)
				if len(st) != 1 {
					return "no status"
				}
				c := findCondition(st[0].Conditions, "ResolvedRefs")
				return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
			}
			p.eventually("EPP TLS in the model", func() bool { return eppTLS() == tc.epp }, eppTLS)
			p.eventually("route ResolvedRefs", func() bool { return matches(routeRefs(), tc.route) }, routeRefs)
			p.eventually("pool ResolvedRefs", func() bool { return matches(poolRefs(), tc.pool) }, poolRefs)
			if st := p.poolStatus(seed.Namespace, seed.PoolName); findCondition(st[0].Conditions, "Accepted").Status != metav1.ConditionTrue {
				t.Errorf("pool Accepted %+v: a TLS problem is ResolvedRefs, the pool stays accepted", findCondition(st[0].Conditions, "Accepted"))
			}
			if tc.policy == "" {
				return
			}
			var name string
			for _, o := range tc.objs {
				if pol, ok := o.(*gwv1.BackendTLSPolicy); ok {
					name = pol.Name
					break
				}
			}
			policy := func() string {
				st := p.out.BackendTLSPolicyStatuses.GetKey(seed.Namespace + "/" + name)
				if st == nil || len(st.Parents) != 1 {
					return "no ancestor"
				}
				a := st.Parents[0]
				if ptr.Deref(a.AncestorRef.Namespace, "") != seed.GatewayNamespace || a.AncestorRef.Name != seed.GatewayName {
					return "ancestor " + string(a.AncestorRef.Name)
				}
				var out []string
				for _, c := range a.Conditions {
					out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
				}
				return strings.Join(out, " ")
			}
			p.eventually("policy conditions (the EPP's Gateway is its ancestor)", func() bool { return policy() == tc.policy }, policy)
		})
	}
}

// TestCredentialNamePerGateway: one route, attached to two Gateways in two
// namespaces, sends to a Service whose DestinationRule names a
// credentialName Secret that only the first namespace holds. The CA is read
// where each Gateway's proxy would read it: the first Gateway's parent
// entry says ResolvedRefs=True and its model carries the CA, the second's
// says ResolvedRefs=False/InvalidBackendTLS naming its namespace, and its
// model has no CA for it (the translator answers 500 there). Adding the
// Secret to the second namespace fixes that parent only.
func TestCredentialNamePerGateway(t *testing.T) {
	caPEM := caConfigMap(t, "x", "ca").Data["ca.crt"]
	gwA, gwB := seed.Gateway(), seed.Gateway()
	gwA.Namespace, gwB.Namespace = "team-a", "team-b"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{
			{Namespace: ptr.To(gwv1.Namespace("team-a")), Name: gwv1.ObjectName(gwA.Name)},
			{Namespace: ptr.To(gwv1.Namespace("team-b")), Name: gwv1.ObjectName(gwB.Name)},
		}},
		Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Name: "web", Port: ptr.To(gwv1.PortNumber(443))}}}}}},
	}}
	for _, gw := range []*gwv1.Gateway{gwA, gwB} {
		gw.Spec.Listeners[0].AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}}
	}
	dr := kubelib.DestinationRule{Namespace: "apps", Name: "web", Host: "web", TLS: &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, CredentialName: "web-ca"}}
	p := newPipeline(t, false, seed.GatewayClassObject(), gwA, gwB, svc, route, dr,
		credentialSecret("team-a", "web-ca", map[string]string{"ca.crt": caPEM}))
	parents := func() string {
		var out []string
		for _, ps := range p.routeStatus("apps", "r") {
			c := findCondition(ps.Conditions, "ResolvedRefs")
			s := fmt.Sprintf("%s:%s/%s", ptr.Deref(ps.ParentRef.Namespace, ""), c.Status, c.Reason)
			if c.Status == metav1.ConditionFalse && !strings.Contains(c.Message, "Service apps/web port 443: DestinationRule apps/web: spec.trafficPolicy.tls.credentialName: neither Secret team-b/web-ca-cacert nor team-b/web-ca exists") {
				s += " (message does not name what is missing: " + c.Message + ")"
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	caIn := func(gw *gwv1.Gateway) string {
		m := p.out.Translator.GetKey(gw.Namespace + "/" + gw.Name)
		if m == nil || len(m.Listeners) != 1 || len(m.Listeners[0].Routes) != 1 {
			return "no route"
		}
		sb := m.Listeners[0].Routes[0].Rules[0].Backends[0].Service
		if sb == nil || sb.TLS == nil {
			return "no TLS"
		}
		ca, ok, _ := sb.TLS.CAFor(gw.Namespace)
		return fmt.Sprintf("%v:%v", ok, string(ca) == caPEM)
	}
	bothCAs := func() string { return caIn(gwA) + " " + caIn(gwB) }
	p.eventually("per-parent ResolvedRefs", func() bool { return parents() == "team-a:True/ResolvedRefs team-b:False/InvalidBackendTLS" }, parents)
	p.eventually("the Secret's CA for team-a only", func() bool { return bothCAs() == "true:true false:false" }, bothCAs)
	p.add(credentialSecret("team-b", "web-ca-cacert", map[string]string{"cacert": caPEM}))
	p.eventually("both parents resolved", func() bool { return parents() == "team-a:True/ResolvedRefs team-b:True/ResolvedRefs" }, parents)
	p.eventually("the CA for both", func() bool { return bothCAs() == "true:true true:true" }, bothCAs)
}

// TestMirrorUpstreamTLS: a Service a route only mirrors to gets its client
// TLS like any backend (the model's Rule.Mirrors), and a mirror whose TLS
// cannot be honoured is dropped and reported, never sent in plaintext.
// Before, a mirror-only Service's cluster was built without its
// BackendTLSPolicy: requests were copied to it in plaintext.
func TestMirrorUpstreamTLS(t *testing.T) {
	gw := seed.Gateway()
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	}
	mirror := func(name string) gwv1.HTTPRouteFilter {
		return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{
			BackendRef: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr.To(gwv1.PortNumber(443))}}}
	}
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: ptr.To(gwv1.Namespace(gw.Namespace)), Name: gwv1.ObjectName(gw.Name)}}},
		Rules: []gwv1.HTTPRouteRule{{
			Filters:     []gwv1.HTTPRouteFilter{mirror("good"), mirror("broken")},
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "main", Port: ptr.To(gwv1.PortNumber(443))}}}},
		}},
	}}
	gw.Spec.Listeners[0].AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	good := backendTLSPolicy("good", t0, "", "ConfigMap", "ca")
	good.Spec.TargetRefs[0].Name = "good"
	broken := backendTLSPolicy("broken", t0, "", "ConfigMap", "absent")
	broken.Spec.TargetRefs[0].Name = "broken"
	p := newPipeline(t, false, seed.GatewayClassObject(), gw, svc("main"), svc("good"), svc("broken"), route, caConfigMap(t, "apps", "ca"), good, broken)
	state := func() string {
		m := p.out.Translator.GetKey(gw.Namespace + "/" + gw.Name)
		if m == nil || len(m.Listeners[0].Routes) != 1 {
			return "no route"
		}
		rule := m.Listeners[0].Routes[0].Rules[0]
		var out []string
		for _, f := range rule.HTTP.Filters {
			out = append(out, "filter:"+string(f.RequestMirror.BackendRef.Name))
		}
		for name, sb := range rule.Mirrors {
			s := "mirror:" + name
			if sb.TLS != nil {
				s += "+tls(" + sb.TLS.SNI + ")"
			}
			out = append(out, s)
		}
		st := p.routeStatus("apps", "r")
		if len(st) == 1 {
			c := findCondition(st[0].Conditions, "ResolvedRefs")
			out = append(out, string(c.Status)+"/"+c.Reason)
		}
		return strings.Join(out, " ")
	}
	want := "filter:good mirror:outbound|443||good.apps.svc.cluster.local+tls(abc.example.com) False/InvalidBackendTLS"
	p.eventually("mirrors", func() bool { return state() == want }, state)
	status := func() string {
		st := p.out.BackendTLSPolicyStatuses.GetKey("apps/broken")
		if st == nil || len(st.Parents) != 1 {
			return "no ancestor"
		}
		return findCondition(st.Parents[0].Conditions, "Accepted").Reason
	}
	p.eventually("the mirror's policy has the Gateway as ancestor", func() bool { return status() == "NoValidCACertificate" }, status)
}
