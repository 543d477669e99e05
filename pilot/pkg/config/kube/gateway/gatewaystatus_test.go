// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// condStrings returns type=status(reason) of each condition.
func condStrings(cs []metav1.Condition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Type+"="+string(c.Status)+" ("+c.Reason+")")
	}
	return out
}

func TestGatewayStatus(t *testing.T) {
	cases := []struct {
		name       string
		gw         *gwv1.Gateway
		programmed bool
		want       []string
	}{
		{name: "seed, programmed", gw: seedGateway(), programmed: true,
			want: []string{"Accepted=True (Accepted)", "Programmed=True (Programmed)"}},
		{name: "seed, deployment not ready", gw: seedGateway(),
			want: []string{"Accepted=True (Accepted)", "Programmed=False (Pending)"}},
		{name: "one invalid listener of five", gw: multiGateway(), programmed: true,
			want: []string{"Accepted=True (ListenersNotValid)", "Programmed=True (Programmed)"}},
		{name: "no valid listener", gw: func() *gwv1.Gateway {
			g := seedGateway()
			g.Spec.Listeners[0].Protocol = gwv1.UDPProtocolType
			return g
		}(), programmed: true, want: []string{"Accepted=False (ListenersNotValid)", "Programmed=True (Programmed)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := GatewayStatus(NewGatewayView(tc.gw, CertificateLookups{}), nil, tc.programmed, now)
			if d := cmp.Diff(tc.want, condStrings(st.Conditions)); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != tc.gw.Generation || !c.LastTransitionTime.Equal(&now) {
					t.Errorf("%s: generation %d, time %v", c.Type, c.ObservedGeneration, c.LastTransitionTime)
				}
			}
		})
	}
}

func TestGatewayListenerStatus(t *testing.T) {
	view := NewGatewayView(multiGateway(), CertificateLookups{})
	st := GatewayStatus(view, map[gwv1.SectionName]int32{"wild": 2, "exact": 1}, true, now)
	type row struct {
		Name     gwv1.SectionName
		Attached int32
		Kinds    int
		Conds    []string
	}
	var got []row
	for _, l := range st.Listeners {
		got = append(got, row{l.Name, l.AttachedRoutes, len(l.SupportedKinds), condStrings(l.Conditions)})
	}
	ok := []string{"Accepted=True (Accepted)", "ResolvedRefs=True (ResolvedRefs)", "Conflicted=False (NoConflicts)", "Programmed=True (Programmed)"}
	want := []row{
		{"wild", 2, 2, ok},
		{"exact", 1, 2, ok},
		{"same", 0, 2, ok},
		{"grpc", 0, 1, ok},
		{"bad", 0, 0, []string{"Accepted=False (UnsupportedProtocol)", "ResolvedRefs=True (ResolvedRefs)", "Conflicted=False (NoConflicts)", "Programmed=False (Invalid)"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if st.Listeners[4].SupportedKinds == nil {
		t.Errorf("supportedKinds of an unsupported protocol is nil, want empty")
	}

	notReady := GatewayStatus(view, nil, false, now)
	if d := cmp.Diff([]string{"Accepted=True (Accepted)", "ResolvedRefs=True (ResolvedRefs)", "Conflicted=False (NoConflicts)", "Programmed=False (Pending)"},
		condStrings(notReady.Listeners[0].Conditions)); d != "" {
		t.Fatalf("listener of a Gateway not programmed (-want +got):\n%s", d)
	}
}

func TestListenerConflicts(t *testing.T) {
	certs := &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}
	gw := seedGateway()
	gw.Spec.Listeners = []gwv1.Listener{
		{Name: "a", Port: 80, Protocol: gwv1.HTTPProtocolType},
		{Name: "b", Port: 80, Protocol: gwv1.HTTPProtocolType},                                                     // same hostname (none) as a
		{Name: "c", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("foo.example.com"))}, // differs by hostname
		{Name: "d", Port: 443, Protocol: gwv1.HTTPSProtocolType, TLS: certs},
		{Name: "e", Port: 443, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("foo.example.com"))},
		{Name: "f", Port: 8443, Protocol: gwv1.HTTPSProtocolType, TLS: certs},
	}
	view := NewGatewayView(gw, CertificateLookups{})
	var got []string
	for _, l := range view.Listeners {
		got = append(got, fmt.Sprintf("%s:%v:%s", l.Name, l.Conflicted, l.ConflictReason))
	}
	want := []string{"a:true:HostnameConflict", "b:true:HostnameConflict", "c:false:", "d:true:ProtocolConflict", "e:true:ProtocolConflict", "f:false:"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	st := GatewayStatus(view, nil, true, now)
	if d := cmp.Diff([]string{"Accepted=True (Accepted)", "ResolvedRefs=True (ResolvedRefs)", "Conflicted=True (HostnameConflict)", "Programmed=False (Invalid)"},
		condStrings(st.Listeners[0].Conditions)); d != "" {
		t.Fatalf("conflicted listener status (-want +got):\n%s", d)
	}

	// Routes attach only to the unconflicted, accepted listeners: c, and f
	// (HTTPS whose Secret does not exist: accepted, not served; routes
	// attach and count in its attachedRoutes, as the Gateway API's
	// GatewayWithAttachedRoutes expects).
	lookup := func(types.NamespacedName) *GatewayView { return view }
	res := AttachRoute(Route{Kind: HTTPRouteKind, Namespace: gw.Namespace, Name: "r", ParentRefs: []gwv1.ParentReference{{Name: "gateway"}}}, lookup, nil)
	if len(res) != 1 || !res[0].Accepted || !cmp.Equal([]gwv1.SectionName{"c", "f"}, res[0].Listeners) {
		t.Fatalf("attachment = %+v, want listeners c and f", res)
	}
	res = AttachRoute(Route{Kind: HTTPRouteKind, Namespace: gw.Namespace, Name: "r",
		ParentRefs: []gwv1.ParentReference{{Name: "gateway", SectionName: ptr.To(gwv1.SectionName("a"))}}}, lookup, nil)
	if len(res) != 1 || res[0].Reason != gwv1.RouteReasonNoMatchingParent {
		t.Fatalf("attachment to a conflicted listener = %+v, want NoMatchingParent", res)
	}
}
