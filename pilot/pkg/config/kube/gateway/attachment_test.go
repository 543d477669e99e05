// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

var multiGW = types.NamespacedName{Namespace: "gateway-namespace", Name: "multi"}

// multiGateway has one listener per rule under test.
func multiGateway() *gwv1.Gateway {
	all := &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: multiGW.Namespace, Name: multiGW.Name},
		Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{
			{Name: "wild", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("*.example.com")),
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: all}},
			{Name: "exact", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("foo.example.com")),
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSelector),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "llm"}}}}},
			{Name: "same", Port: 8080, Protocol: gwv1.HTTPProtocolType},
			{Name: "grpc", Port: 9090, Protocol: gwv1.HTTPProtocolType,
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: all, Kinds: []gwv1.RouteGroupKind{{Kind: "GRPCRoute"}}}},
			{Name: "bad", Port: 81, Protocol: gwv1.UDPProtocolType, AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: all}},
		}},
	}
}

// testGateways holds our Gateways; anything else (another class's, or
// missing) is nil.
func testGateways() GatewayLookup {
	views := map[types.NamespacedName]*GatewayView{
		seedGW:  NewGatewayView(seedGateway(), CertificateLookups{}),
		multiGW: NewGatewayView(multiGateway(), CertificateLookups{}),
	}
	return func(k types.NamespacedName) *GatewayView { return views[k] }
}

type parentOpt func(*gwv1.ParentReference)

func section(s string) parentOpt {
	return func(p *gwv1.ParentReference) { p.SectionName = ptr.To(gwv1.SectionName(s)) }
}
func port(n int32) parentOpt {
	return func(p *gwv1.ParentReference) { p.Port = ptr.To(gwv1.PortNumber(n)) }
}

func parent(gw types.NamespacedName, opts ...parentOpt) gwv1.ParentReference {
	p := gwv1.ParentReference{Namespace: ptr.To(gwv1.Namespace(gw.Namespace)), Name: gwv1.ObjectName(gw.Name)}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func TestAttachRoute(t *testing.T) {
	type want struct {
		reason    gwv1.RouteConditionReason
		listeners []gwv1.SectionName
	}
	accepted := func(ls ...gwv1.SectionName) want { return want{gwv1.RouteReasonAccepted, ls} }
	rejected := func(r gwv1.RouteConditionReason) want { return want{reason: r} }
	cases := []struct {
		name      string
		kind      string // default HTTPRoute
		namespace string // default llm-namespace
		hostnames []gwv1.Hostname
		parent    gwv1.ParentReference
		want      *want // nil: no entry
	}{
		{name: "seed route", parent: parent(seedGW), want: ptr.To(accepted("http"))},
		{name: "GRPCRoute on the seed gateway", kind: GRPCRouteKind, parent: parent(seedGW), want: ptr.To(accepted("http"))},
		{name: "namespace defaults to the route's", namespace: "gateway-namespace",
			parent: gwv1.ParentReference{Name: "gateway"}, want: ptr.To(accepted("http"))},
		{name: "defaulted namespace has no Gateway of ours", parent: gwv1.ParentReference{Name: "gateway"}},
		{name: "explicit group and kind", parent: gwv1.ParentReference{Group: ptr.To(gwv1.Group(GatewayGroup)), Kind: ptr.To(gwv1.Kind("Gateway")),
			Namespace: ptr.To(gwv1.Namespace("gateway-namespace")), Name: "gateway"}, want: ptr.To(accepted("http"))},
		{name: "Service parent (mesh) gets no entry", parent: gwv1.ParentReference{Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Service")), Name: "svc"}},
		{name: "other group gets no entry", parent: gwv1.ParentReference{Group: ptr.To(gwv1.Group("example.com")), Namespace: ptr.To(gwv1.Namespace("gateway-namespace")), Name: "gateway"}},
		{name: "Gateway of another class gets no entry", parent: parent(types.NamespacedName{Namespace: "gateway-namespace", Name: "theirs"})},

		{name: "wildcard and selector listeners", hostnames: []gwv1.Hostname{"foo.example.com"}, parent: parent(multiGW), want: ptr.To(accepted("wild", "exact"))},
		{name: "no route hostnames matches all listener hostnames", parent: parent(multiGW), want: ptr.To(accepted("wild", "exact"))},
		{name: "route wildcard vs listener exact", hostnames: []gwv1.Hostname{"*.example.com"}, parent: parent(multiGW, section("exact")), want: ptr.To(accepted("exact"))},
		{name: "deeper host matches wildcard only", hostnames: []gwv1.Hostname{"a.b.example.com"}, parent: parent(multiGW, port(80)), want: ptr.To(accepted("wild"))},
		{name: "apex does not match the wildcard", hostnames: []gwv1.Hostname{"example.com"}, parent: parent(multiGW, section("wild")),
			want: ptr.To(rejected(gwv1.RouteReasonNoMatchingListenerHostname))},
		{name: "apex on all listeners: hostname-free listeners reject by allowedRoutes", hostnames: []gwv1.Hostname{"example.com"}, parent: parent(multiGW),
			want: ptr.To(rejected(gwv1.RouteReasonNotAllowedByListeners))},
		{name: "port narrows", hostnames: []gwv1.Hostname{"foo.example.com"}, parent: parent(multiGW, port(80)), want: ptr.To(accepted("wild", "exact"))},
		{name: "sectionName narrows", hostnames: []gwv1.Hostname{"foo.example.com"}, parent: parent(multiGW, section("wild")), want: ptr.To(accepted("wild"))},
		{name: "sectionName not found", parent: parent(multiGW, section("missing")), want: ptr.To(rejected(gwv1.RouteReasonNoMatchingParent))},
		{name: "port not found", parent: parent(multiGW, port(443)), want: ptr.To(rejected(gwv1.RouteReasonNoMatchingParent))},
		{name: "sectionName and port disagree", parent: parent(multiGW, section("exact"), port(8080)), want: ptr.To(rejected(gwv1.RouteReasonNoMatchingParent))},
		{name: "sectionName and port agree", parent: parent(multiGW, section("same"), port(8080)), namespace: "gateway-namespace", want: ptr.To(accepted("same"))},
		{name: "listener not accepted", parent: parent(multiGW, section("bad")), want: ptr.To(rejected(gwv1.RouteReasonNoMatchingParent))},
		{name: "Same rejects another namespace", parent: parent(multiGW, section("same")), want: ptr.To(rejected(gwv1.RouteReasonNotAllowedByListeners))},
		{name: "Selector rejects an unlabelled namespace", namespace: "other-namespace", hostnames: []gwv1.Hostname{"foo.example.com"},
			parent: parent(multiGW, section("exact")), want: ptr.To(rejected(gwv1.RouteReasonNotAllowedByListeners))},
		{name: "Selector rejects, All admits", namespace: "other-namespace", hostnames: []gwv1.Hostname{"foo.example.com"},
			parent: parent(multiGW, port(80)), want: ptr.To(accepted("wild"))},
		{name: "kinds: HTTPRoute not allowed", parent: parent(multiGW, section("grpc")), want: ptr.To(rejected(gwv1.RouteReasonNotAllowedByListeners))},
		{name: "kinds: GRPCRoute allowed", kind: GRPCRouteKind, parent: parent(multiGW, section("grpc")), want: ptr.To(accepted("grpc"))},
		{name: "no listener on the port matches the hostname", hostnames: []gwv1.Hostname{"bar.example.org"},
			parent: parent(multiGW, port(80)), want: ptr.To(rejected(gwv1.RouteReasonNoMatchingListenerHostname))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Route{Kind: HTTPRouteKind, Namespace: "llm-namespace", Name: "llm-route", Hostnames: tc.hostnames,
				ParentRefs: []gwv1.ParentReference{tc.parent}}
			if tc.kind != "" {
				r.Kind = tc.kind
			}
			if tc.namespace != "" {
				r.Namespace = tc.namespace
			}
			got := AttachRoute(r, testGateways(), testNamespaces)
			if tc.want == nil {
				if len(got) != 0 {
					t.Fatalf("got %+v, want no entry", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("got %d entries, want 1", len(got))
			}
			g := got[0]
			if g.Reason != tc.want.reason || g.Accepted != (tc.want.reason == gwv1.RouteReasonAccepted) || g.Message == "" {
				t.Errorf("Accepted = %v, %s: %q; want reason %s", g.Accepted, g.Reason, g.Message, tc.want.reason)
			}
			if d := cmp.Diff(tc.want.listeners, g.Listeners); d != "" {
				t.Errorf("listeners (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.parent, g.ParentRef); d != "" {
				t.Errorf("parentRef not kept as written (-want +got):\n%s", d)
			}
		})
	}
}

func TestAttachRouteSeveralParents(t *testing.T) {
	theirs := types.NamespacedName{Namespace: "gateway-namespace", Name: "theirs"}
	r := Route{Kind: HTTPRouteKind, Namespace: "llm-namespace", Name: "llm-route", Hostnames: []gwv1.Hostname{"foo.example.com"},
		ParentRefs: []gwv1.ParentReference{parent(seedGW), parent(theirs), parent(multiGW, section("same"))}}
	got := AttachRoute(r, testGateways(), testNamespaces)
	if len(got) != 2 || got[0].Gateway != seedGW || got[1].Gateway != multiGW {
		t.Fatalf("got %+v, want entries for gateway then multi, none for theirs", got)
	}
	if !got[0].Accepted || got[1].Accepted {
		t.Fatalf("accepted = %v, %v; want true, false", got[0].Accepted, got[1].Accepted)
	}
	want := RouteAttachment{Kind: "HTTPRoute", Route: seedRoute, Reason: "NotAllowedByListeners", Message: got[1].Message}
	if d := cmp.Diff(want, got[1].RouteAttachment(r)); d != "" {
		t.Errorf("RouteAttachment (-want +got):\n%s", d)
	}
	if ra := got[0].RouteAttachment(r); !ra.Accepted || ra.Reason != "Accepted" {
		t.Errorf("RouteAttachment of the accepted parent = %+v", ra)
	}
}

func TestAttachedRoutes(t *testing.T) {
	gws := testGateways()
	route := func(name string, hosts []gwv1.Hostname, parents ...gwv1.ParentReference) []ParentResult {
		return AttachRoute(Route{Kind: HTTPRouteKind, Namespace: "llm-namespace", Name: name, Hostnames: hosts, ParentRefs: parents}, gws, testNamespaces)
	}
	results := [][]ParentResult{
		route("a", nil, parent(seedGW), parent(multiGW)),                                                          // gateway/http, multi/wild+exact
		route("b", []gwv1.Hostname{"a.example.com"}, parent(multiGW, section("wild")), parent(multiGW, port(80))), // multi/wild once
		route("c", nil, parent(multiGW, section("same"))),                                                         // rejected
	}
	want := map[types.NamespacedName]map[gwv1.SectionName]int32{
		seedGW:  {"http": 1},
		multiGW: {"wild": 2, "exact": 1},
	}
	if d := cmp.Diff(want, AttachedRoutes(results)); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}
