// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/seed"
)

// TestExternalAuthResolution: an ExternalAuth filter's backendRef resolves
// like a backendRef, and every way it can fail closes the rule: the route
// stays Accepted, ResolvedRefs=False names the reason and the filter, and
// the translator gets the filter as Invalid (its rule answers 500). Cases:
// a missing Service (BackendNotFound), another namespace without a
// ReferenceGrant (RefNotPermitted, before existence), a kind other than
// Service (InvalidKind), a port the Service lacks (BackendNotFound), GRPC
// to a port without HTTP/2 (UnsupportedProtocol), an ExternalAuth in a
// backendRef's filters (UnsupportedValue); and a resolved one reaches the
// translator with its settings (headers lower-cased and sorted, body
// limit) and its filter name.
func TestExternalAuthResolution(t *testing.T) {
	h2c := "kubernetes.io/h2c"
	authSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "authz"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: 9000, AppProtocol: &h2c}, {Name: "http", Port: 8000}}}}
	other := authSvc.DeepCopy()
	other.Namespace = "auth-system"
	filter := func(proto gwv1.HTTPRouteExternalAuthProtocol, ref gwv1.BackendObjectReference) gwv1.HTTPRouteFilter {
		f := &gwv1.HTTPExternalAuthFilter{ExternalAuthProtocol: proto, BackendRef: ref}
		if proto == gwv1.HTTPRouteExternalAuthGRPCProtocol {
			f.GRPCAuthConfig = &gwv1.GRPCAuthConfig{AllowedRequestHeaders: []string{"X-User", "authorization", "x-user"}}
		}
		f.ForwardBody = &gwv1.ForwardBodyConfig{MaxSize: 4096}
		return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterExternalAuth, ExternalAuth: f}
	}
	ref := func(ns, name string, port int32) gwv1.BackendObjectReference {
		r := gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr.To(gwv1.PortNumber(port))}
		if ns != "" {
			r.Namespace = ptr.To(gwv1.Namespace(ns))
		}
		return r
	}
	for _, tc := range []struct {
		name       string
		f          gwv1.HTTPRouteFilter
		backendRef bool // put it in the backendRef's filters
		reason     string
		message    string
	}{
		{name: "resolved", f: filter(gwv1.HTTPRouteExternalAuthGRPCProtocol, ref("", "authz", 9000)), reason: "ResolvedRefs"},
		{name: "missing Service", f: filter(gwv1.HTTPRouteExternalAuthGRPCProtocol, ref("", "gone", 9000)), reason: "BackendNotFound", message: "ExternalAuth backendRef: Service " + seed.Namespace + "/gone not found"},
		{name: "no ReferenceGrant", f: filter(gwv1.HTTPRouteExternalAuthGRPCProtocol, ref("auth-system", "authz", 9000)), reason: "RefNotPermitted", message: "no ReferenceGrant in namespace auth-system"},
		{name: "no ReferenceGrant, missing too", f: filter(gwv1.HTTPRouteExternalAuthGRPCProtocol, ref("auth-system", "gone", 9000)), reason: "RefNotPermitted"},
		{name: "wrong kind", f: func() gwv1.HTTPRouteFilter {
			f := filter(gwv1.HTTPRouteExternalAuthGRPCProtocol, ref("", "authz", 9000))
			f.ExternalAuth.BackendRef.Kind = ptr.To(gwv1.Kind("ConfigMap"))
			return f
		}(), reason: "InvalidKind", message: "only a Service can be an authorization server"},
		{name: "port missing", f: filter(gwv1.HTTPRouteExternalAuthGRPCProtocol, ref("", "authz", 9999)), reason: "BackendNotFound", message: "has no port 9999"},
		{name: "GRPC over HTTP/1.1", f: filter(gwv1.HTTPRouteExternalAuthGRPCProtocol, ref("", "authz", 8000)), reason: "UnsupportedProtocol", message: "protocol GRPC needs HTTP/2"},
		{name: "in a backendRef", f: filter(gwv1.HTTPRouteExternalAuthHTTPProtocol, ref("", "authz", 8000)), backendRef: true, reason: "UnsupportedValue", message: ExternalAuthFilterMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			route := seed.HTTPRoute()
			if tc.backendRef {
				route.Spec.Rules[0].BackendRefs[0].Filters = []gwv1.HTTPRouteFilter{tc.f}
			} else {
				route.Spec.Rules[0].Filters = []gwv1.HTTPRouteFilter{tc.f}
			}
			p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), route, seed.InferencePool(), seed.EPPService(), authSvc, other)
			p.eventually("route status", func() bool {
				rs := p.routeStatus(seed.Namespace, seed.RouteName)
				return len(rs) == 1 && rs[0].Conditions[1].Reason == tc.reason
			}, func() string { return fmt.Sprint(p.routeStatus(seed.Namespace, seed.RouteName)) })
			rs := p.routeStatus(seed.Namespace, seed.RouteName)[0]
			if rs.Conditions[0].Status != metav1.ConditionTrue || !strings.Contains(rs.Conditions[1].Message, tc.message) {
				t.Fatalf("conditions %+v, want Accepted=True and ResolvedRefs %s containing %q", rs.Conditions, tc.reason, tc.message)
			}
			gw := p.out.Translator.GetKey(seed.GatewayNamespace + "/" + seed.GatewayName)
			if gw == nil || len(gw.Listeners[0].Routes) != 1 {
				t.Fatalf("translator view: %+v", gw)
			}
			rule := gw.Listeners[0].Routes[0].Rules[0]
			if tc.backendRef {
				if len(rule.ExternalAuth) != 0 {
					t.Fatalf("a backendRef's ExternalAuth reached the rule: %+v", rule.ExternalAuth)
				}
				return
			}
			if len(rule.ExternalAuth) != 1 {
				t.Fatalf("rule.ExternalAuth = %+v, want one", rule.ExternalAuth)
			}
			ea := rule.ExternalAuth[0]
			if tc.reason != "ResolvedRefs" {
				if ea.Invalid == "" || ea.Service != nil {
					t.Fatalf("unresolved filter reached the translator as usable: %+v", ea)
				}
				return
			}
			if ea.Invalid != "" || ea.Service == nil || ea.Service.Host != "authz."+seed.Namespace+".svc.cluster.local" || ea.Service.Port != 9000 ||
				!ea.Service.HTTP2 || strings.Join(ea.AllowedRequestHeaders, ",") != "authorization,x-user" || ea.MaxRequestBytes != 4096 ||
				!strings.HasPrefix(ea.Name, "envoy.filters.http.ext_authz/") {
				t.Fatalf("resolved filter %+v (service %+v)", ea, ea.Service)
			}
		})
	}
}

// A ReferenceGrant from HTTPRoutes to Services lets an ExternalAuth use an
// authorization server in another namespace.
func TestExternalAuthReferenceGrant(t *testing.T) {
	h2c := "kubernetes.io/h2c"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "auth-system", Name: "authz"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 9000, AppProtocol: &h2c}}}}
	route := seed.HTTPRoute()
	route.Spec.Rules[0].Filters = []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterExternalAuth, ExternalAuth: &gwv1.HTTPExternalAuthFilter{
		ExternalAuthProtocol: gwv1.HTTPRouteExternalAuthGRPCProtocol, GRPCAuthConfig: &gwv1.GRPCAuthConfig{},
		BackendRef: gwv1.BackendObjectReference{Name: "authz", Namespace: ptr.To(gwv1.Namespace("auth-system")), Port: ptr.To(gwv1.PortNumber(9000))}}}}
	p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), route, seed.InferencePool(), seed.EPPService(), svc)
	status := func() string {
		rs := p.routeStatus(seed.Namespace, seed.RouteName)
		if len(rs) != 1 {
			return ""
		}
		return rs[0].Conditions[1].Reason
	}
	p.eventually("RefNotPermitted", func() bool { return status() == "RefNotPermitted" }, status)
	p.add(&gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "auth-system", Name: "allow-authz"},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Namespace: seed.Namespace}},
			To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Service", Name: ptr.To(gwv1.ObjectName("authz"))}},
		},
	})
	p.eventually("resolved with the grant", func() bool { return status() == "ResolvedRefs" }, status)
}
