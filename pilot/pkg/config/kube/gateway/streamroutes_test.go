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
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// streamGateway is a Gateway of the seed's class with a TLS Passthrough
// listener on 443 for *.example.com and a TCP listener on 9000, both
// admitting routes from every namespace.
func streamGateway() *gwv1.Gateway {
	all := gwv1.NamespacesFromAll
	ns := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.GatewayNamespace, Name: "streams", Generation: 1},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: seed.GatewayClass,
			Listeners: []gwv1.Listener{
				{Name: "tls", Port: 443, Protocol: gwv1.TLSProtocolType, Hostname: ptr.To(gwv1.Hostname("*.example.com")),
					TLS: &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModePassthrough)}, AllowedRoutes: ns},
				{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType, AllowedRoutes: ns},
				{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: ns},
			},
		},
	}
}

func streamParent(section string) []gwv1.ParentReference {
	return []gwv1.ParentReference{{Namespace: ptr.To(gwv1.Namespace(seed.GatewayNamespace)), Name: "streams",
		SectionName: ptr.To(gwv1.SectionName(section))}}
}

func plainService(ns, name string, port int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "p", Port: port}}}}
}

// TestStreamRoutes: TLSRoutes and TCPRoutes go through the controller as
// HTTPRoutes do. A route whose backend is missing, in another namespace
// without a ReferenceGrant, or an InferencePool fails closed: ResolvedRefs
// False with the reason, and the translator's backend is Invalid (its
// connections are closed, tcp_proxy's share to InvalidBackendCluster). A
// route of the wrong kind for the listener it names is not accepted
// (NotAllowedByListeners). A ReferenceGrant from TCPRoutes admits the
// cross-namespace backend.
func TestStreamRoutes(t *testing.T) {
	tlsOK := &gwv1.TLSRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "tls-ok", Generation: 2},
		Spec: gwv1.TLSRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: streamParent("tls")},
			Hostnames: []gwv1.Hostname{"a.example.com"},
			Rules:     []gwv1.TLSRouteRule{{BackendRefs: []gwv1.BackendRef{serviceRef("", "backend", 8443)}}}},
	}
	tlsMissing := &gwv1.TLSRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "tls-missing", Generation: 1},
		Spec: gwv1.TLSRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: streamParent("tls")},
			Hostnames: []gwv1.Hostname{"b.example.com"},
			Rules:     []gwv1.TLSRouteRule{{BackendRefs: []gwv1.BackendRef{serviceRef("", "nowhere", 8443)}}}},
	}
	tlsPool := &gwv1.TLSRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "tls-pool", Generation: 1},
		Spec: gwv1.TLSRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: streamParent("tls")},
			Hostnames: []gwv1.Hostname{"c.example.com"},
			Rules:     []gwv1.TLSRouteRule{{BackendRefs: []gwv1.BackendRef{poolRef("", seed.PoolName)}}}},
	}
	tcpCross := &gwv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "tcp-cross", Generation: 3},
		Spec: gwv1.TCPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: streamParent("tcp")},
			Rules: []gwv1.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{serviceRef("other", "db", 5432)}}}},
	}
	tcpOnTLS := &gwv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "tcp-on-tls", Generation: 1},
		Spec: gwv1.TCPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: streamParent("tls")},
			Rules: []gwv1.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{serviceRef("", "backend", 8443)}}}},
	}
	p := newPipeline(t, true, seed.GatewayClassObject(), streamGateway(), plainService("apps", "backend", 8443),
		plainService("other", "db", 5432), seed.InferencePool(), seed.EPPService(),
		tlsOK, tlsMissing, tlsPool, tcpCross, tcpOnTLS)

	status := func(kind, key string) string {
		c := p.out.TLSRouteStatuses
		if kind == TCPRouteKind {
			c = p.out.TCPRouteStatuses
		}
		s := c.GetKey(key)
		if s == nil || len(s.Parents) != 1 {
			return "none"
		}
		var out []string
		for _, typ := range []gwv1.RouteConditionType{gwv1.RouteConditionAccepted, gwv1.RouteConditionResolvedRefs} {
			if cond := meta.FindStatusCondition(s.Parents[0].Conditions, string(typ)); cond != nil {
				out = append(out, fmt.Sprintf("%s=%s/%s@%d", cond.Type, cond.Status, cond.Reason, cond.ObservedGeneration))
			}
		}
		return strings.Join(out, " ")
	}
	want := map[string]string{
		"TLSRoute apps/tls-ok":                     "Accepted=True/Accepted@2 ResolvedRefs=True/ResolvedRefs@2",
		"TLSRoute apps/tls-missing":                "Accepted=True/Accepted@1 ResolvedRefs=False/BackendNotFound@1",
		"TLSRoute " + seed.Namespace + "/tls-pool": "Accepted=True/Accepted@1 ResolvedRefs=False/InvalidKind@1",
		"TCPRoute apps/tcp-cross":                  "Accepted=True/Accepted@3 ResolvedRefs=False/RefNotPermitted@3",
		"TCPRoute apps/tcp-on-tls":                 "Accepted=False/NotAllowedByListeners@1 ResolvedRefs=True/ResolvedRefs@1",
	}
	check := func(want map[string]string) {
		t.Helper()
		describe := func() string {
			var b strings.Builder
			for k := range want {
				kind, key, _ := strings.Cut(k, " ")
				fmt.Fprintf(&b, "%s: %s\n", k, status(kind, key))
			}
			return b.String()
		}
		p.eventually("stream route statuses", func() bool {
			for k, w := range want {
				kind, key, _ := strings.Cut(k, " ")
				if status(kind, key) != w {
					return false
				}
			}
			return true
		}, describe)
	}
	check(want)

	// The translator: the TLS listener carries the three TLSRoutes, the
	// TCP listener the TCPRoute; invalid backends are marked Invalid.
	routes := func() map[string]*model.Route {
		out := map[string]*model.Route{}
		if g := p.out.Translator.GetKey(seed.GatewayNamespace + "/streams"); g != nil {
			for _, l := range g.Listeners {
				for _, r := range l.Routes {
					out[l.Name+" "+r.Kind+" "+r.Namespace+"/"+r.Name] = r
				}
			}
		}
		return out
	}
	p.eventually("translator routes", func() bool { return len(routes()) == 4 }, func() string { return fmt.Sprint(routes()) })
	rs := routes()
	backend := func(key string) model.Backend {
		r := rs[key]
		if r == nil || len(r.Rules) != 1 || len(r.Rules[0].Backends) != 1 {
			t.Fatalf("%s: route %+v, want one rule with one backend", key, r)
		}
		return r.Rules[0].Backends[0]
	}
	if b := backend("tls TLSRoute apps/tls-ok"); b.Invalid != "" || b.Service == nil || b.Service.Port != 8443 || rs["tls TLSRoute apps/tls-ok"].Rules[0].TLS == nil {
		t.Errorf("tls-ok backend = %+v, want the Service port 8443 of a TLS rule", b)
	}
	for _, k := range []string{"tls TLSRoute apps/tls-missing", "tls TLSRoute " + seed.Namespace + "/tls-pool", "tcp TCPRoute apps/tcp-cross"} {
		if b := backend(k); b.Invalid == "" || b.Service != nil || b.Pool != nil {
			t.Errorf("%s backend = %+v, want Invalid", k, b)
		}
	}
	if r := rs["tcp TCPRoute apps/tcp-cross"]; r.Rules[0].TCP == nil {
		t.Errorf("tcp-cross rule is not a TCP rule: %+v", r.Rules[0])
	}

	// A ReferenceGrant from TCPRoutes in apps admits the Service; one from
	// HTTPRoutes would not have.
	p.add(grant("other", "HTTPRoute", "apps", "", "Service", "db"))
	p.settle()
	check(map[string]string{"TCPRoute apps/tcp-cross": "Accepted=True/Accepted@3 ResolvedRefs=False/RefNotPermitted@3"})
	g := grant("other", "TCPRoute", "apps", "", "Service", "db")
	g.Name = "tcp-grant"
	p.add(g)
	check(map[string]string{"TCPRoute apps/tcp-cross": "Accepted=True/Accepted@3 ResolvedRefs=True/ResolvedRefs@3"})
	p.eventually("tcp-cross backend valid", func() bool {
		r := routes()["tcp TCPRoute apps/tcp-cross"]
		return r != nil && r.Rules[0].Backends[0].Service != nil && r.Rules[0].Backends[0].Invalid == ""
	}, nil)
}
