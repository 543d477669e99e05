// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/upstreamtls"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// testLookups serves the seed's pool and EPP Service in llm-namespace, a
// pool and a Service in pools-namespace, and grants (all in
// pools-namespace).
func testLookups(grants ...*gwv1.ReferenceGrant) BackendLookups {
	other := seedPool()
	other.Namespace, other.Name = "pools-namespace", "shared-pool"
	other.Spec.AppProtocol = inferencev1.AppProtocolH2C
	other.Spec.EndpointPickerRef = &inferencev1.EndpointPickerRef{Name: "shared-epp", Port: &inferencev1.Port{Number: 9002}}
	otherEPP := seedEPP()
	otherEPP.Namespace, otherEPP.Name = "pools-namespace", "shared-epp"
	otherEPP.Spec.Ports[0].AppProtocol = nil
	http1 := seedPool()
	http1.Name, http1.Spec.AppProtocol = "http-pool", inferencev1.AppProtocolHTTP
	pools := map[types.NamespacedName]*inferencev1.InferencePool{
		{Namespace: "llm-namespace", Name: "vllm-llama3-8b"}: seedPool(),
		{Namespace: "llm-namespace", Name: "http-pool"}:      http1,
		{Namespace: "pools-namespace", Name: "shared-pool"}:  other,
	}
	svcs := map[types.NamespacedName]*corev1.Service{
		{Namespace: "llm-namespace", Name: "vllm-llama3-8b-epp"}: seedEPP(),
		{Namespace: "llm-namespace", Name: "echo"}:               {ObjectMeta: metav1.ObjectMeta{Namespace: "llm-namespace", Name: "echo"}},
		{Namespace: "pools-namespace", Name: "echo"}:             {ObjectMeta: metav1.ObjectMeta{Namespace: "pools-namespace", Name: "echo"}},
		{Namespace: "pools-namespace", Name: "shared-epp"}:       otherEPP,
	}
	return BackendLookups{
		Service: func(k types.NamespacedName) *corev1.Service { return svcs[k] },
		Pool:    func(k types.NamespacedName) *inferencev1.InferencePool { return pools[k] },
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

var enabled = BackendOptions{InferenceEnabled: true, ClusterDomain: "cluster.local"}

func poolRef(ns, name string) gwv1.BackendRef {
	r := gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
		Group: ptr.To(gwv1.Group(InferencePoolGroup)), Kind: ptr.To(gwv1.Kind(InferencePoolKind)), Name: gwv1.ObjectName(name)}}
	if ns != "" {
		r.Namespace = ptr.To(gwv1.Namespace(ns))
	}
	return r
}

func serviceRef(ns, name string, p int32) gwv1.BackendRef {
	r := gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr.To(gwv1.PortNumber(p))}}
	if ns != "" {
		r.Namespace = ptr.To(gwv1.Namespace(ns))
	}
	return r
}

// TestResolveSeedPool: the seed's route to vllm-llama3-8b gives what the
// xDS translator prints as outbound|54321||vllm-llama3-8b-ip-22dc7de1... and
// the EPP cluster outbound|9002||vllm-llama3-8b-epp...
func TestResolveSeedPool(t *testing.T) {
	ref := poolRef("", "vllm-llama3-8b")
	ref.Port = ptr.To(gwv1.PortNumber(1234)) // ignored for pools
	ref.Weight = ptr.To(int32(30))
	got := ResolveBackendRef(HTTPRouteKind, "llm-namespace", ref, testLookups(), enabled)
	want := ResolvedBackend{
		Group: InferencePoolGroup, Kind: InferencePoolKind, Key: types.NamespacedName{Namespace: "llm-namespace", Name: "vllm-llama3-8b"},
		Weight: 30, ResolvedRefs: true, Reason: gwv1.RouteReasonResolvedRefs,
		Upstream: types.NamespacedName{Namespace: "llm-namespace", Name: "vllm-llama3-8b-epp"},
		Pool: &PoolBackend{
			Namespace:     "llm-namespace",
			Name:          "vllm-llama3-8b",
			ShadowService: "vllm-llama3-8b-ip-22dc7de1",
			Host:          "vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local",
			Port:          54321,
			TargetPorts:   []int32{8000},
			AppProtocol:   inferencev1.AppProtocolHTTP,
			EPP: &EPPBackend{Service: "vllm-llama3-8b-epp", Host: "vllm-llama3-8b-epp.llm-namespace.svc.cluster.local", Port: 9002, AppProtocol: "http2",
				FailureMode: inferencev1.EndpointPickerFailOpen},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestResolveBackendRef(t *testing.T) {
	grantPools := grant("pools-namespace", "HTTPRoute", "llm-namespace", InferencePoolGroup, InferencePoolKind, "")
	grantPoolNamed := grant("pools-namespace", "HTTPRoute", "llm-namespace", InferencePoolGroup, InferencePoolKind, "shared-pool")
	grantPoolOtherName := grant("pools-namespace", "HTTPRoute", "llm-namespace", InferencePoolGroup, InferencePoolKind, "another-pool")
	grantServices := grant("pools-namespace", "HTTPRoute", "llm-namespace", "", "Service", "")
	grantGRPC := grant("pools-namespace", "GRPCRoute", "llm-namespace", InferencePoolGroup, InferencePoolKind, "")
	disabled := BackendOptions{ClusterDomain: "cluster.local"}
	cases := []struct {
		name      string
		routeKind string // default HTTPRoute
		ref       gwv1.BackendRef
		grants    []*gwv1.ReferenceGrant
		opts      *BackendOptions // default enabled
		reason    gwv1.RouteConditionReason
		message   string // exact, when set
	}{
		{name: "Service", ref: serviceRef("", "echo", 80), reason: gwv1.RouteReasonResolvedRefs},
		{name: "Service, explicit core group and kind", ref: func() gwv1.BackendRef {
			r := serviceRef("", "echo", 80)
			r.Group, r.Kind = ptr.To(gwv1.Group("")), ptr.To(gwv1.Kind("Service"))
			return r
		}(), reason: gwv1.RouteReasonResolvedRefs},
		{name: "Service missing", ref: serviceRef("", "nope", 80), reason: gwv1.RouteReasonBackendNotFound},
		{name: "Service in another group", ref: func() gwv1.BackendRef {
			r := serviceRef("", "echo", 80)
			r.Group = ptr.To(gwv1.Group("example.com"))
			return r
		}(), reason: gwv1.RouteReasonInvalidKind},
		{name: "unsupported kind", ref: func() gwv1.BackendRef {
			r := serviceRef("", "echo", 80)
			r.Kind = ptr.To(gwv1.Kind("Pod"))
			return r
		}(), reason: gwv1.RouteReasonInvalidKind},
		{name: "InferencePool in the core group", ref: func() gwv1.BackendRef {
			r := poolRef("", "vllm-llama3-8b")
			r.Group = nil
			return r
		}(), reason: gwv1.RouteReasonInvalidKind},
		{name: "cross-namespace Service without grant", ref: serviceRef("pools-namespace", "echo", 80), reason: gwv1.RouteReasonRefNotPermitted},
		{name: "cross-namespace Service with grant", ref: serviceRef("pools-namespace", "echo", 80), grants: []*gwv1.ReferenceGrant{grantServices},
			reason: gwv1.RouteReasonResolvedRefs},
		{name: "cross-namespace Service, grant for pools only", ref: serviceRef("pools-namespace", "echo", 80), grants: []*gwv1.ReferenceGrant{grantPools},
			reason: gwv1.RouteReasonRefNotPermitted},
		{name: "cross-namespace Service granted but missing", ref: serviceRef("pools-namespace", "nope", 80), grants: []*gwv1.ReferenceGrant{grantServices},
			reason: gwv1.RouteReasonBackendNotFound},

		{name: "pool", ref: poolRef("", "vllm-llama3-8b"), reason: gwv1.RouteReasonResolvedRefs},
		{name: "pool missing", ref: poolRef("", "nope"), reason: gwv1.RouteReasonBackendNotFound},
		{name: "pool, flag off", ref: poolRef("", "vllm-llama3-8b"), opts: &disabled,
			reason: gwv1.RouteReasonInvalidKind, message: "InferencePool is not enabled. To enable, set ENABLE_GATEWAY_API_INFERENCE_EXTENSION to true in istiod"},
		{name: "order 1: flag off before hostname", ref: poolRef("", "vllm.llm-namespace.svc.cluster.local"), opts: &disabled,
			reason: gwv1.RouteReasonInvalidKind, message: InferencePoolNotEnabledMessage},
		{name: "order 2: hostname before missing", ref: poolRef("", "vllm.llm-namespace.svc.cluster.local"),
			reason: "InvalidDestination", message: "the name of the InferencePool must be used, not the hostname"},
		{name: "order 3: missing", ref: poolRef("", "vllm"), reason: gwv1.RouteReasonBackendNotFound},
		{name: "flag off before RefNotPermitted", ref: poolRef("pools-namespace", "shared-pool"), opts: &disabled,
			reason: gwv1.RouteReasonInvalidKind, message: InferencePoolNotEnabledMessage},
		{name: "cross-namespace pool without grant", ref: poolRef("pools-namespace", "shared-pool"), reason: gwv1.RouteReasonRefNotPermitted},
		{name: "cross-namespace pool, grant for Services only", ref: poolRef("pools-namespace", "shared-pool"),
			grants: []*gwv1.ReferenceGrant{grantServices}, reason: gwv1.RouteReasonRefNotPermitted},
		{name: "cross-namespace pool, grant for another name", ref: poolRef("pools-namespace", "shared-pool"),
			grants: []*gwv1.ReferenceGrant{grantPoolOtherName}, reason: gwv1.RouteReasonRefNotPermitted},
		{name: "cross-namespace pool, grant for GRPCRoutes only", ref: poolRef("pools-namespace", "shared-pool"),
			grants: []*gwv1.ReferenceGrant{grantGRPC}, reason: gwv1.RouteReasonRefNotPermitted},
		{name: "cross-namespace pool from a GRPCRoute with a GRPCRoute grant", routeKind: GRPCRouteKind, ref: poolRef("pools-namespace", "shared-pool"),
			grants: []*gwv1.ReferenceGrant{grantGRPC}, reason: gwv1.RouteReasonResolvedRefs},
		{name: "HTTP/1.1 pool from a GRPCRoute", routeKind: GRPCRouteKind, ref: poolRef("", "http-pool"),
			reason: gwv1.RouteReasonUnsupportedProtocol,
			message: `InferencePool llm-namespace/http-pool has appProtocol "http" (HTTP/1.1), which cannot carry gRPC: ` +
				`a GRPCRoute needs the pool's spec.appProtocol to be "kubernetes.io/h2c" (HTTP/2 without TLS)`},
		{name: "pool without appProtocol from a GRPCRoute", routeKind: GRPCRouteKind, ref: poolRef("", "vllm-llama3-8b"),
			reason: gwv1.RouteReasonUnsupportedProtocol,
			message: `InferencePool llm-namespace/vllm-llama3-8b has no appProtocol (HTTP/1.1), which cannot carry gRPC: ` +
				`a GRPCRoute needs the pool's spec.appProtocol to be "kubernetes.io/h2c" (HTTP/2 without TLS)`},
		{name: "HTTP/1.1 pool from an HTTPRoute", ref: poolRef("", "http-pool"), reason: gwv1.RouteReasonResolvedRefs},
		{name: "cross-namespace pool, grant for all pools", ref: poolRef("pools-namespace", "shared-pool"),
			grants: []*gwv1.ReferenceGrant{grantPools}, reason: gwv1.RouteReasonResolvedRefs},
		{name: "cross-namespace pool, grant for this name", ref: poolRef("pools-namespace", "shared-pool"),
			grants: []*gwv1.ReferenceGrant{grantServices, grantPoolNamed}, reason: gwv1.RouteReasonResolvedRefs},
		{name: "cross-namespace pool granted but missing", ref: poolRef("pools-namespace", "nope"),
			grants: []*gwv1.ReferenceGrant{grantPools}, reason: gwv1.RouteReasonBackendNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts, kind := enabled, HTTPRouteKind
			if tc.opts != nil {
				opts = *tc.opts
			}
			if tc.routeKind != "" {
				kind = tc.routeKind
			}
			got := ResolveBackendRef(kind, "llm-namespace", tc.ref, testLookups(tc.grants...), opts)
			if got.Reason != tc.reason || got.ResolvedRefs != (tc.reason == gwv1.RouteReasonResolvedRefs) {
				t.Fatalf("ResolvedRefs = %v, %s: %q; want reason %s", got.ResolvedRefs, got.Reason, got.Message, tc.reason)
			}
			if tc.message != "" && got.Message != tc.message {
				t.Errorf("message = %q, want %q", got.Message, tc.message)
			}
			if !got.ResolvedRefs && (got.Message == "" || got.Pool != nil || got.Service != nil) {
				t.Errorf("unresolved backend = %+v: want a message and no target", got)
			}
			if got.ResolvedRefs && (got.Pool == nil) == (got.Service == nil) {
				t.Errorf("resolved backend = %+v: want exactly one of Pool and Service", got)
			}
		})
	}
}

func TestResolvePoolVariants(t *testing.T) {
	grants := grant("pools-namespace", "HTTPRoute", "llm-namespace", InferencePoolGroup, InferencePoolKind, "")
	got := ResolveBackendRef(HTTPRouteKind, "llm-namespace", poolRef("pools-namespace", "shared-pool"), testLookups(grants), enabled)
	want := &PoolBackend{
		Namespace:     "pools-namespace",
		Name:          "shared-pool",
		ShadowService: ShadowServiceName("shared-pool"),
		Host:          ShadowServiceName("shared-pool") + ".pools-namespace.svc.cluster.local",
		Port:          54321,
		TargetPorts:   []int32{8000},
		AppProtocol:   inferencev1.AppProtocolH2C,
		EPP: &EPPBackend{Service: "shared-epp", Host: "shared-epp.pools-namespace.svc.cluster.local", Port: 9002,
			FailureMode: inferencev1.EndpointPickerFailClose},
	}
	if d := cmp.Diff(want, got.Pool); d != "" {
		t.Fatalf("pool in another namespace, h2c, FailClose by default (-want +got):\n%s", d)
	}
	if got.Weight != 1 {
		t.Errorf("default weight = %d, want 1", got.Weight)
	}

	svc := ResolveBackendRef(HTTPRouteKind, "llm-namespace", serviceRef("", "echo", 8080), testLookups(), BackendOptions{ClusterDomain: "example.internal"})
	if d := cmp.Diff(&ServiceBackend{Host: "echo.llm-namespace.svc.example.internal", Port: 8080}, svc.Service); d != "" {
		t.Fatalf("Service backend (-want +got):\n%s", d)
	}

	zero := poolRef("", "vllm-llama3-8b")
	zero.Weight = ptr.To(int32(0))
	if got := ResolveBackendRef(HTTPRouteKind, "llm-namespace", zero, testLookups(), enabled); got.Weight != 0 {
		t.Errorf("weight 0 became %d", got.Weight)
	}
}

func TestRouteResolvedRefs(t *testing.T) {
	lk := testLookups()
	good := ResolveBackendRef(HTTPRouteKind, "llm-namespace", poolRef("", "vllm-llama3-8b"), lk, enabled)
	missing := ResolveBackendRef(HTTPRouteKind, "llm-namespace", poolRef("", "nope"), lk, enabled)
	hostname := ResolveBackendRef(HTTPRouteKind, "llm-namespace", poolRef("", "a.b"), lk, enabled)
	if ok, reason, _ := RouteResolvedRefs([]ResolvedBackend{good, good}); !ok || reason != gwv1.RouteReasonResolvedRefs {
		t.Errorf("all resolved: %v %s", ok, reason)
	}
	if ok, reason, msg := RouteResolvedRefs([]ResolvedBackend{good, missing, hostname}); ok || reason != gwv1.RouteReasonBackendNotFound || msg != missing.Message {
		t.Errorf("first failure: %v %s %q, want BackendNotFound", ok, reason, msg)
	}
	if ok, reason, _ := RouteResolvedRefs(nil); !ok || reason != gwv1.RouteReasonResolvedRefs {
		t.Errorf("no backends: %v %s", ok, reason)
	}
}

// A pool whose Endpoint Picker does not resolve is not a usable backend:
// the route's ResolvedRefs is False with reason BackendNotFound (GIE
// conformance InferencePoolInvalidEPPService) and a message naming the pool
// and its endpointPickerRef, and the translator gets no target (so the rule
// answers 500 while the status says why). A pool without endpointPickerRef
// is the same: this implementation routes a pool only through its EPP.
func TestResolvePoolWithUnresolvedEPP(t *testing.T) {
	external := seed.EPPService()
	external.Spec.Type = corev1.ServiceTypeExternalName
	cases := []struct {
		name   string
		mutate func(p *inferencev1.InferencePool)
		epp    *corev1.Service
		want   string // the exact message
	}{
		{name: "EPP Service missing (conformance InferencePoolInvalidEPPService)", mutate: func(p *inferencev1.InferencePool) {
			p.Spec.EndpointPickerRef = &inferencev1.EndpointPickerRef{Kind: "Service", Name: "non-existent-epp-svc", Port: &inferencev1.Port{Number: 9002}}
		}, epp: nil, want: "InferencePool llm-namespace/vllm-llama3-8b: its Endpoint Picker (spec.endpointPickerRef Service llm-namespace/non-existent-epp-svc port 9002) " +
			"does not resolve: Service llm-namespace/non-existent-epp-svc not found"},
		{name: "no such port on the EPP Service", mutate: func(p *inferencev1.InferencePool) { p.Spec.EndpointPickerRef.Port.Number = 9003 },
			epp: seed.EPPService(), want: "InferencePool llm-namespace/vllm-llama3-8b: its Endpoint Picker (spec.endpointPickerRef Service llm-namespace/vllm-llama3-8b-epp port 9003) " +
				"does not resolve: Service llm-namespace/vllm-llama3-8b-epp has no port 9003"},
		{name: "ExternalName EPP Service", epp: external,
			want: "InferencePool llm-namespace/vllm-llama3-8b: its Endpoint Picker (spec.endpointPickerRef Service llm-namespace/vllm-llama3-8b-epp port 9002) " +
				"does not resolve: Service llm-namespace/vllm-llama3-8b-epp is of type ExternalName, which is not supported"},
		{name: "wrong group", mutate: func(p *inferencev1.InferencePool) {
			p.Spec.EndpointPickerRef.Group = ptr.To(inferencev1.Group("example.com"))
		},
			epp: seed.EPPService(), want: "InferencePool llm-namespace/vllm-llama3-8b: its Endpoint Picker (spec.endpointPickerRef Service.example.com llm-namespace/vllm-llama3-8b-epp port 9002) " +
				`does not resolve: spec.endpointPickerRef.group "example.com" is not supported: only the core group (a Service)`},
		{name: "wrong kind", mutate: func(p *inferencev1.InferencePool) { p.Spec.EndpointPickerRef.Kind = "ConfigMap" },
			epp: seed.EPPService(), want: "InferencePool llm-namespace/vllm-llama3-8b: its Endpoint Picker (spec.endpointPickerRef ConfigMap llm-namespace/vllm-llama3-8b-epp port 9002) " +
				`does not resolve: spec.endpointPickerRef.kind "ConfigMap" is not supported: only Service`},
		{name: "no endpointPickerRef (conformance InferencePoolMissingEPPRef)", mutate: func(p *inferencev1.InferencePool) { p.Spec.EndpointPickerRef = nil },
			epp: seed.EPPService(), want: "InferencePool llm-namespace/vllm-llama3-8b has no Endpoint Picker: spec.endpointPickerRef is not set, " +
				"and this implementation sends a pool's requests only through its Endpoint Picker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := seed.InferencePool()
			if tc.mutate != nil {
				tc.mutate(pool)
			}
			lk := BackendLookups{
				Pool: func(types.NamespacedName) *inferencev1.InferencePool { return pool },
				Service: func(k types.NamespacedName) *corev1.Service {
					if tc.epp != nil && k == (types.NamespacedName{Namespace: tc.epp.Namespace, Name: tc.epp.Name}) {
						return tc.epp
					}
					return nil
				},
			}
			got := ResolveBackendRef(HTTPRouteKind, seed.Namespace, poolRef("", seed.PoolName), lk, enabled)
			if got.ResolvedRefs || got.Reason != gwv1.RouteReasonBackendNotFound || got.Pool != nil {
				t.Fatalf("resolved = %v, reason %s, pool %+v; want BackendNotFound and no pool target", got.ResolvedRefs, got.Reason, got.Pool)
			}
			if got.Message != tc.want {
				t.Errorf("message:\n got %q\nwant %q", got.Message, tc.want)
			}
		})
	}
}

// A Service backend's protocol is its port's: HTTP/2 when the port's
// appProtocol (or, without one, its name) says so, whatever route uses it.
// A GRPCRoute to a port that declares no HTTP/2 is UnsupportedProtocol,
// naming the port and what to declare; an HTTPRoute to it resolves.
func TestServiceBackendProtocol(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "http", Port: 80},
		{Name: "h2c", Port: 81, AppProtocol: ptr.To("kubernetes.io/h2c")},
		{Name: "grpc-api", Port: 82},
		{Name: "grpc", Port: 83, AppProtocol: ptr.To("http")},
	}}}
	lk := BackendLookups{Service: func(k types.NamespacedName) *corev1.Service {
		if k.String() == "ns/s" {
			return svc
		}
		return nil
	}}
	for _, c := range []struct {
		port  int32
		http2 bool
	}{{80, false}, {81, true}, {82, true}, {83, false}, {99, false}} {
		h := ResolveBackendRef(HTTPRouteKind, "ns", serviceRef("", "s", c.port), lk, enabled)
		if !h.ResolvedRefs || h.Service.HTTP2 != c.http2 {
			t.Errorf("HTTPRoute to port %d: resolved %v, HTTP2 %v; want resolved, HTTP2 %v", c.port, h.ResolvedRefs, h.Service != nil && h.Service.HTTP2, c.http2)
		}
		g := ResolveBackendRef(GRPCRouteKind, "ns", serviceRef("", "s", c.port), lk, enabled)
		if g.ResolvedRefs != c.http2 {
			t.Errorf("GRPCRoute to port %d: resolved %v, want %v (%s)", c.port, g.ResolvedRefs, c.http2, g.Message)
		}
		if !c.http2 && (g.Reason != gwv1.RouteReasonUnsupportedProtocol || !strings.Contains(g.Message, "kubernetes.io/h2c")) {
			t.Errorf("GRPCRoute to port %d: %s %q, want UnsupportedProtocol saying what to declare", c.port, g.Reason, g.Message)
		}
	}
}

// A Service port that declares no protocol (no appProtocol, a name that is
// no protocol) and has client TLS negotiates its HTTP version by ALPN
// (ServiceBackend.NegotiateHTTP), whatever route uses it, so a GRPCRoute
// to it resolves: the server must offer h2, as with Envoy's auto_config.
// Without TLS there is nothing to negotiate with: a GRPCRoute to it is
// UnsupportedProtocol, and the message names both ways out (appProtocol
// kubernetes.io/h2c, or TLS). A port that declares HTTP/1 (by name or
// appProtocol) stays HTTP/1.1 with or without TLS, and its message does
// not suggest TLS, which would not help. TLS that cannot be honoured (a
// BackendTLSPolicy whose CA is missing) fails closed for a GRPCRoute as
// for an HTTPRoute: InvalidBackendTLS, never a plaintext or HTTP/1.1
// fallback.
func TestServiceBackendNegotiatesHTTPWithTLS(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "btls", Port: 443},                                           // no protocol, TLS
		{Name: "btls-plain", Port: 8080},                                    // no protocol, plaintext
		{Name: "http-tls", Port: 8443},                                      // HTTP/1 by name, TLS
		{Name: "web", Port: 9443, AppProtocol: ptr.To("http")},              // HTTP/1 by appProtocol, TLS
		{Name: "h2", Port: 10443, AppProtocol: ptr.To("kubernetes.io/h2c")}, // HTTP/2, TLS
		{Name: "btls-noca", Port: 11443},                                    // no protocol, TLS whose CA is missing
		{Port: 12443},                                                       // no name at all, TLS
	}}}
	tlsPorts := map[string]bool{"btls": true, "http-tls": true, "web": true, "h2": true, "": true}
	lk := BackendLookups{
		Service: func(k types.NamespacedName) *corev1.Service {
			if k.String() == "ns/s" {
				return svc
			}
			return nil
		},
		UpstreamTLS: func(p upstreamtls.Port) upstreamtls.Result {
			switch {
			case p.Name == "btls-noca":
				return upstreamtls.Result{Problem: `BackendTLSPolicy ns/p: CA ConfigMap ns/ca not found`}
			case tlsPorts[p.Name]:
				return upstreamtls.Result{TLS: &model.EPPTLS{Host: p.Host, SNI: "abc.example.com", CACertificates: []byte("ca")}}
			}
			return upstreamtls.Result{}
		},
	}
	for _, c := range []struct {
		port               int32
		negotiate, http2   bool
		grpcOK             bool
		grpcReason         gwv1.RouteConditionReason
		messageSuggestsTLS bool
	}{
		{port: 443, negotiate: true, grpcOK: true},
		{port: 12443, negotiate: true, grpcOK: true},
		{port: 8080, grpcReason: gwv1.RouteReasonUnsupportedProtocol, messageSuggestsTLS: true},
		{port: 8443, grpcReason: gwv1.RouteReasonUnsupportedProtocol},
		{port: 9443, grpcReason: gwv1.RouteReasonUnsupportedProtocol},
		{port: 10443, http2: true, grpcOK: true},
		{port: 11443, grpcReason: RouteReasonInvalidBackendTLS},
	} {
		h := ResolveBackendRef(HTTPRouteKind, "ns", serviceRef("", "s", c.port), lk, enabled)
		if c.grpcReason == RouteReasonInvalidBackendTLS {
			if h.ResolvedRefs || h.Reason != RouteReasonInvalidBackendTLS {
				t.Errorf("HTTPRoute to port %d: %v %s, want InvalidBackendTLS", c.port, h.ResolvedRefs, h.Reason)
			}
		} else if !h.ResolvedRefs || h.Service.NegotiateHTTP != c.negotiate || h.Service.HTTP2 != c.http2 {
			t.Errorf("HTTPRoute to port %d: resolved %v %+v; want NegotiateHTTP %v, HTTP2 %v", c.port, h.ResolvedRefs, h.Service, c.negotiate, c.http2)
		}
		g := ResolveBackendRef(GRPCRouteKind, "ns", serviceRef("", "s", c.port), lk, enabled)
		if g.ResolvedRefs != c.grpcOK {
			t.Errorf("GRPCRoute to port %d: resolved %v (%s %q), want %v", c.port, g.ResolvedRefs, g.Reason, g.Message, c.grpcOK)
			continue
		}
		if c.grpcOK {
			if g.Service.NegotiateHTTP != c.negotiate || g.Service.HTTP2 != c.http2 || g.Service.TLS == nil {
				t.Errorf("GRPCRoute to port %d: %+v, want NegotiateHTTP %v, HTTP2 %v, with TLS", c.port, g.Service, c.negotiate, c.http2)
			}
			continue
		}
		if g.Reason != c.grpcReason {
			t.Errorf("GRPCRoute to port %d: reason %s (%q), want %s", c.port, g.Reason, g.Message, c.grpcReason)
		}
		if c.grpcReason != gwv1.RouteReasonUnsupportedProtocol {
			continue
		}
		if !strings.Contains(g.Message, "kubernetes.io/h2c") {
			t.Errorf("GRPCRoute to port %d: message %q does not name appProtocol kubernetes.io/h2c", c.port, g.Message)
		}
		if got := strings.Contains(g.Message, "BackendTLSPolicy") && strings.Contains(g.Message, "ALPN"); got != c.messageSuggestsTLS {
			t.Errorf("GRPCRoute to port %d: message %q suggests TLS: %v, want %v", c.port, g.Message, got, c.messageSuggestsTLS)
		}
	}
}
