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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/seed"
)

var lsGW = types.NamespacedName{Namespace: "infra", Name: "gw"}

// lsGateway is a Gateway with two HTTP listeners on port 80 and the given
// allowedListeners (nil for none).
func lsGateway(al *gwv1.AllowedListeners) *gwv1.Gateway {
	all := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}}
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: lsGW.Namespace, Name: lsGW.Name, Generation: 1},
		Spec: gwv1.GatewaySpec{GatewayClassName: "ours", AllowedListeners: al, Listeners: []gwv1.Listener{
			{Name: "gw-a", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("a.com")), AllowedRoutes: all},
			{Name: "gw-b", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("b.com")), AllowedRoutes: all},
		}},
	}
}

func allowFrom(from gwv1.FromNamespaces, sel map[string]string) *gwv1.AllowedListeners {
	al := &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(from)}}
	if sel != nil {
		al.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: sel}
	}
	return al
}

// entry is a ListenerSet listener: protocol HTTP unless proto is given, on
// port 80, allowedRoutes from (Same when "").
func entry(name, hostname string, proto gwv1.ProtocolType, from gwv1.FromNamespaces) gwv1.ListenerEntry {
	if proto == "" {
		proto = gwv1.HTTPProtocolType
	}
	e := gwv1.ListenerEntry{Name: gwv1.SectionName(name), Port: 80, Protocol: proto}
	if hostname != "" {
		e.Hostname = ptr.To(gwv1.Hostname(hostname))
	}
	if from != "" {
		e.AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(from)}}
	}
	return e
}

var lsEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// listenerSet is a ListenerSet of lsGW created created seconds after
// lsEpoch.
func listenerSet(ns, name string, created int, entries ...gwv1.ListenerEntry) *gwv1.ListenerSet {
	return &gwv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 3,
			CreationTimestamp: metav1.NewTime(lsEpoch.Add(time.Duration(created) * time.Second))},
		Spec: gwv1.ListenerSetSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(lsGW.Name), Namespace: ptr.To(gwv1.Namespace(lsGW.Namespace))},
			Listeners: entries,
		},
	}
}

func TestAllowsListenerSets(t *testing.T) {
	labels := nsLabelsOf(map[string]map[string]string{"picked": {"allowed": "ns"}, "other": {}})
	cases := []struct {
		name string
		al   *gwv1.AllowedListeners
		ns   string
		want bool
	}{
		{"no allowedListeners: none", nil, lsGW.Namespace, false},
		{"namespaces unset: none", &gwv1.AllowedListeners{}, lsGW.Namespace, false},
		{"None", allowFrom(gwv1.NamespacesFromNone, nil), lsGW.Namespace, false},
		{"Same, same namespace", allowFrom(gwv1.NamespacesFromSame, nil), lsGW.Namespace, true},
		{"Same, other namespace", allowFrom(gwv1.NamespacesFromSame, nil), "other", false},
		{"All", allowFrom(gwv1.NamespacesFromAll, nil), "other", true},
		{"Selector, matching", allowFrom(gwv1.NamespacesFromSelector, map[string]string{"allowed": "ns"}), "picked", true},
		{"Selector, not matching", allowFrom(gwv1.NamespacesFromSelector, map[string]string{"allowed": "ns"}), "other", false},
		{"Selector, unknown namespace", allowFrom(gwv1.NamespacesFromSelector, map[string]string{"allowed": "ns"}), "gone", false},
		{"Selector without selector", allowFrom(gwv1.NamespacesFromSelector, nil), "picked", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := AllowsListenerSets(lsGateway(tc.al), tc.ns, labels)
			if got != tc.want {
				t.Errorf("allowed = %v (%s), want %v", got, msg, tc.want)
			}
			if !got && !strings.Contains(msg, lsGW.String()) {
				t.Errorf("message %q does not name the Gateway", msg)
			}
		})
	}
}

// viewWith builds lsGW's view with sets.
func viewWith(gw *gwv1.Gateway, certs CertificateLookups, labels NamespaceLabels, sets ...*gwv1.ListenerSet) *GatewayView {
	v := NewGatewayView(gw, certs)
	v.AddListenerSets(gw, sets, certs, labels)
	return v
}

// listenerStates describes each listener of each ListenerSet of v as
// "set/listener=ok" or "set/listener=<conflict reason>", in order.
func listenerStates(v *GatewayView) []string {
	var out []string
	for _, s := range v.ListenerSets {
		for _, l := range s.Listeners {
			state := "ok"
			switch {
			case l.Conflicted:
				state = string(l.ConflictReason)
			case !l.Accepted:
				state = string(l.Reason)
			}
			out = append(out, fmt.Sprintf("%s/%s=%s", s.ListenerSet.Name, l.Name, state))
		}
	}
	return out
}

func TestListenerSetConflictPrecedence(t *testing.T) {
	same := allowFrom(gwv1.NamespacesFromSame, nil)
	// Created out of name order: "b-first" is older than "a-second", so it
	// wins although its name sorts later; "c-tie" and "d-tie" share a
	// creation time and are ordered by name.
	sets := []*gwv1.ListenerSet{
		listenerSet("infra", "a-second", 2, entry("x", "x.com", "", ""), entry("dup-set", "shared.com", "", "")),
		listenerSet("infra", "b-first", 1, entry("dup-gw", "a.com", "", ""), entry("dup-set", "shared.com", "", ""),
			entry("tcp", "", gwv1.TCPProtocolType, ""), entry("y", "y.com", "", "")),
		listenerSet("infra", "d-tie", 3, entry("z", "z.com", "", "")),
		listenerSet("infra", "c-tie", 3, entry("z", "z.com", "", "")),
	}
	v := viewWith(lsGateway(same), CertificateLookups{}, nil, sets...)

	got := strings.Join(listenerStates(v), " ")
	want := "b-first/dup-gw=HostnameConflict b-first/dup-set=ok b-first/tcp=ProtocolConflict b-first/y=ok " +
		"a-second/x=ok a-second/dup-set=HostnameConflict " +
		"c-tie/z=ok d-tie/z=HostnameConflict"
	if got != want {
		t.Errorf("listeners:\n got %s\nwant %s", got, want)
	}
	for _, l := range v.Listeners {
		if l.Conflicted {
			t.Errorf("Gateway listener %s conflicted: the Gateway's own listeners win (%s)", l.Name, l.ConflictMessage)
		}
	}
	if n := v.AttachedListenerSets(); n != 3 {
		t.Errorf("attachedListenerSets = %d, want 3 (d-tie has no valid listener)", n)
	}
	// The conflict message names the winner.
	if msg := v.ListenerSets[0].Listeners[0].ConflictMessage; !strings.Contains(msg, "gw-a of Gateway infra/gw") {
		t.Errorf("conflict message %q does not name the Gateway listener", msg)
	}
}

func TestListenerSetWithOnlyConflictsBlocksNothing(t *testing.T) {
	// "early" has only a listener that loses to the Gateway: it is not
	// accepted, so its listeners do not take part in later conflicts...
	// and here "late" has the same hostname as a losing listener, not as a
	// winner, so it is accepted.
	gw := lsGateway(allowFrom(gwv1.NamespacesFromSame, nil))
	v := viewWith(gw, CertificateLookups{}, nil,
		listenerSet("infra", "early", 1, entry("p", "", gwv1.TCPProtocolType, "")),
		listenerSet("infra", "late", 2, entry("q", "", "", "")))
	if got, want := strings.Join(listenerStates(v), " "), "early/p=ProtocolConflict late/q=ok"; got != want {
		t.Errorf("listeners: got %s, want %s", got, want)
	}
	if v.ListenerSets[0].Accepted() || !v.ListenerSets[1].Accepted() {
		t.Errorf("accepted = %v, %v; want false, true", v.ListenerSets[0].Accepted(), v.ListenerSets[1].Accepted())
	}
}

func lsConds(cs []metav1.Condition) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}

func TestListenerSetStatus(t *testing.T) {
	same := allowFrom(gwv1.NamespacesFromSame, nil)
	t.Run("not allowed", func(t *testing.T) {
		for _, al := range []*gwv1.AllowedListeners{nil, allowFrom(gwv1.NamespacesFromNone, nil), same} {
			v := viewWith(lsGateway(al), CertificateLookups{}, nil, listenerSet("elsewhere", "ls", 1, entry("l", "l.com", "", "")))
			st := ListenerSetStatus(&v.ListenerSets[0], nil)
			if got, want := lsConds(st.Conditions), "Accepted=False/NotAllowed Programmed=False/NotAllowed"; got != want {
				t.Errorf("allowedListeners %+v: conditions %s, want %s", al, got, want)
			}
			if len(st.Listeners) != 0 || v.AttachedListenerSets() != 0 {
				t.Errorf("listeners %+v, attached %d; want none", st.Listeners, v.AttachedListenerSets())
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != 3 {
					t.Errorf("%s observedGeneration %d, want the ListenerSet's 3", c.Type, c.ObservedGeneration)
				}
			}
		}
	})
	t.Run("parent not accepted", func(t *testing.T) {
		gw := lsGateway(same)
		v := NewGatewayView(gw, CertificateLookups{})
		v.ClassProblem = "bad parameters"
		v.AddListenerSets(gw, []*gwv1.ListenerSet{listenerSet("infra", "ls", 1, entry("l", "l.com", "", ""))}, CertificateLookups{}, nil)
		st := ListenerSetStatus(&v.ListenerSets[0], nil)
		if got, want := lsConds(st.Conditions), "Accepted=False/ParentNotAccepted Programmed=False/ParentNotAccepted"; got != want {
			t.Errorf("conditions %s, want %s", got, want)
		}
	})
	t.Run("partly conflicted, then programmed", func(t *testing.T) {
		v := viewWith(lsGateway(same), CertificateLookups{}, nil,
			listenerSet("infra", "ls", 1, entry("ok", "ok.com", "", ""), entry("dup", "a.com", "", ""), entry("tcp", "", gwv1.TCPProtocolType, "")))
		st := ListenerSetStatus(&v.ListenerSets[0], map[gwv1.SectionName]int32{"ok": 2})
		if got, want := lsConds(st.Conditions), "Accepted=True/ListenersNotValid Programmed=False/Pending"; got != want {
			t.Errorf("conditions %s, want %s", got, want)
		}
		wantListeners := map[gwv1.SectionName]string{
			"ok":  "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Pending",
			"dup": "Accepted=False/HostnameConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/HostnameConflict Programmed=False/HostnameConflict",
			"tcp": "Accepted=False/ProtocolConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/ProtocolConflict Programmed=False/ProtocolConflict",
		}
		for _, l := range st.Listeners {
			if got := lsConds(l.Conditions); got != wantListeners[l.Name] {
				t.Errorf("listener %s: %s, want %s", l.Name, got, wantListeners[l.Name])
			}
		}
		if st.Listeners[0].AttachedRoutes != 2 || st.Listeners[1].AttachedRoutes != 0 {
			t.Errorf("attachedRoutes %d, %d; want 2, 0", st.Listeners[0].AttachedRoutes, st.Listeners[1].AttachedRoutes)
		}
		if got := WithListenerSetProgrammed(st, false); lsConds(got.Conditions) != lsConds(st.Conditions) {
			t.Errorf("not programmed changed the conditions: %s", lsConds(got.Conditions))
		}
		pr := WithListenerSetProgrammed(st, true)
		if got, want := lsConds(pr.Conditions), "Accepted=True/ListenersNotValid Programmed=True/Programmed"; got != want {
			t.Errorf("programmed: %s, want %s", got, want)
		}
		if got := lsConds(pr.Listeners[0].Conditions); !strings.HasSuffix(got, "Programmed=True/Programmed") {
			t.Errorf("programmed listener ok: %s", got)
		}
		if got := lsConds(pr.Listeners[1].Conditions); !strings.HasSuffix(got, "Programmed=False/HostnameConflict") {
			t.Errorf("programmed listener dup: %s", got)
		}
		if lsConds(st.Conditions) != "Accepted=True/ListenersNotValid Programmed=False/Pending" {
			t.Error("WithListenerSetProgrammed modified its input")
		}
	})
	// A ListenerSet listener with a pre-routing filter of a type infermesh
	// does not serve as one (ExternalAuth) is refused as a Gateway's own
	// listener is: never programmed without it.
	t.Run("listener filters", func(t *testing.T) {
		f := entry("auth", "auth.com", "", "")
		f.Filters = &gwv1.ListenerFilters{Requests: []gwv1.ListenerFilter{{Type: gwv1.ListenerFilterExternalAuth,
			ExternalAuth: &gwv1.HTTPExternalAuthFilter{ExternalAuthProtocol: gwv1.HTTPRouteExternalAuthHTTPProtocol,
				BackendRef: gwv1.BackendObjectReference{Name: "authz", Port: ptr.To(gwv1.PortNumber(8080))}}}}}
		v := viewWith(lsGateway(same), CertificateLookups{}, nil, listenerSet("infra", "ls", 1, entry("ok", "ok.com", "", ""), f))
		st := WithListenerSetProgrammed(ListenerSetStatus(&v.ListenerSets[0], nil), true)
		if got, want := lsConds(st.Conditions), "Accepted=True/ListenersNotValid Programmed=True/Programmed"; got != want {
			t.Errorf("conditions %s, want %s", got, want)
		}
		wantListeners := map[gwv1.SectionName]string{
			"ok":   "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed",
			"auth": "Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
		}
		for _, l := range st.Listeners {
			if got := lsConds(l.Conditions); got != wantListeners[l.Name] {
				t.Errorf("listener %s: %s, want %s", l.Name, got, wantListeners[l.Name])
			}
		}
	})
}

func TestListenerSetCertificateNeedsGrantFromListenerSets(t *testing.T) {
	web := "web"
	secret := tlsSecret(t, web, "cert")
	https := func(name string) gwv1.ListenerEntry {
		return gwv1.ListenerEntry{Name: gwv1.SectionName(name), Port: 443, Protocol: gwv1.HTTPSProtocolType,
			Hostname: ptr.To(gwv1.Hostname(name + ".com")),
			TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{
				{Name: "cert", Namespace: ptr.To(gwv1.Namespace(web))}}}}
	}
	grant := func(kind string) *gwv1.ReferenceGrant {
		return &gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: web, Name: "g-" + kind},
			Spec: gwv1.ReferenceGrantSpec{
				From: []gwv1.ReferenceGrantFrom{{Group: GatewayGroup, Kind: gwv1.Kind(kind), Namespace: "infra"}},
				To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}}}}
	}
	gw := lsGateway(allowFrom(gwv1.NamespacesFromAll, nil))
	for _, tc := range []struct {
		name   string
		grants []*gwv1.ReferenceGrant
		want   string
	}{
		// A grant to Gateways does not cover ListenerSets.
		{"grant from Gateways only", []*gwv1.ReferenceGrant{grant("Gateway")},
			"Accepted=False/ListenersNotValid Programmed=False/ListenersNotValid"},
		{"grant from ListenerSets", []*gwv1.ReferenceGrant{grant("ListenerSet")},
			"Accepted=True/Accepted Programmed=False/Pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certs := certLookups([]*corev1.Secret{secret}, tc.grants)
			v := viewWith(gw, certs, nil, listenerSet("infra", "ls", 1, https("secure")))
			st := ListenerSetStatus(&v.ListenerSets[0], nil)
			if got := lsConds(st.Conditions); got != tc.want {
				t.Errorf("conditions %s, want %s (listener: %s)", got, tc.want, lsConds(st.Listeners[0].Conditions))
			}
			if strings.HasPrefix(tc.want, "Accepted=False") {
				if got := findCondition(st.Listeners[0].Conditions, "ResolvedRefs"); got.Reason != string(gwv1.ListenerReasonRefNotPermitted) ||
					!strings.Contains(got.Message, "ListenerSets of namespace infra") {
					t.Errorf("ResolvedRefs %s %q, want RefNotPermitted naming ListenerSets", got.Reason, got.Message)
				}
			}
		})
	}
}

func TestAttachRouteWithListenerSets(t *testing.T) {
	gw := lsGateway(allowFrom(gwv1.NamespacesFromAll, nil))
	lsKey := types.NamespacedName{Namespace: "team", Name: "ls"}
	v := viewWith(gw, CertificateLookups{}, nil,
		listenerSet("team", "ls", 1, entry("same", "same.com", "", gwv1.NamespacesFromSame), entry("any", "any.com", "", gwv1.NamespacesFromAll)),
		listenerSet("team", "losing", 2, entry("dup", "a.com", "", "")))
	gateways := func(k types.NamespacedName) *GatewayView {
		if k == lsGW {
			return v
		}
		return nil
	}
	sets := func(k types.NamespacedName) (types.NamespacedName, bool) {
		if k.Namespace == "team" && (k.Name == "ls" || k.Name == "losing") {
			return lsGW, true
		}
		return types.NamespacedName{}, false
	}
	lsRef := func(name string, opts ...parentOpt) gwv1.ParentReference {
		p := gwv1.ParentReference{Group: ptr.To(gwv1.Group(GatewayGroup)), Kind: ptr.To(gwv1.Kind(ListenerSetKind)),
			Namespace: ptr.To(gwv1.Namespace("team")), Name: gwv1.ObjectName(name)}
		for _, o := range opts {
			o(&p)
		}
		return p
	}
	describe := func(rs []ParentResult) []string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%s|%s|%s|%v", r.Gateway, r.ListenerSet, r.Reason, joinSections(r.Listeners)))
		}
		return out
	}
	cases := []struct {
		name  string
		ns    string
		refs  []gwv1.ParentReference
		wants []string
	}{
		{"Gateway parentRef: the Gateway's own listeners only", "team", []gwv1.ParentReference{parent(lsGW)},
			[]string{"infra/gw|/|Accepted|gw-a, gw-b"}},
		{"ListenerSet parentRef: its listeners only, allowedRoutes Same is its namespace", "team", []gwv1.ParentReference{lsRef("ls")},
			[]string{"infra/gw|team/ls|Accepted|same, any"}},
		{"route in the Gateway's namespace: not Same as the ListenerSet", "infra", []gwv1.ParentReference{lsRef("ls", section("same"))},
			[]string{"infra/gw|team/ls|NotAllowedByListeners|"}},
		{"both parentRefs resolve independently", "team", []gwv1.ParentReference{parent(lsGW, section("any")), lsRef("ls", section("any"))},
			[]string{"infra/gw|/|NoMatchingParent|", "infra/gw|team/ls|Accepted|any"}},
		{"ListenerSet not accepted", "team", []gwv1.ParentReference{lsRef("losing")},
			[]string{"infra/gw|team/losing|NoMatchingParent|"}},
		{"unknown ListenerSet: no entry", "team", []gwv1.ParentReference{lsRef("missing")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			route := Route{Kind: HTTPRouteKind, Namespace: tc.ns, Name: "r", ParentRefs: tc.refs}
			got := describe(AttachRouteWithListenerSets(route, gateways, sets, nil))
			if strings.Join(got, "\n") != strings.Join(tc.wants, "\n") {
				t.Errorf("results:\n got %q\nwant %q", got, tc.wants)
			}
		})
	}
	// Without a ListenerSet lookup, a ListenerSet parentRef gets no entry.
	route := Route{Kind: HTTPRouteKind, Namespace: "team", Name: "r", ParentRefs: []gwv1.ParentReference{lsRef("ls")}}
	if got := AttachRoute(route, gateways, nil); len(got) != 0 {
		t.Errorf("AttachRoute without ListenerSets: %v", describe(got))
	}

	// Counting: a route through the Gateway and through the ListenerSet
	// counts on each parent's listeners, not across them.
	both := Route{Kind: HTTPRouteKind, Namespace: "team", Name: "r", ParentRefs: []gwv1.ParentReference{parent(lsGW), lsRef("ls")}}
	results := [][]ParentResult{AttachRouteWithListenerSets(both, gateways, sets, nil)}
	gwCounts, setCounts := AttachedRoutes(results)[lsGW], ListenerSetAttachedRoutes(results)[lsKey]
	if gwCounts["gw-a"] != 1 || gwCounts["same"] != 0 || setCounts["same"] != 1 || setCounts["any"] != 1 || setCounts["gw-a"] != 0 {
		t.Errorf("attached: Gateway %v, ListenerSet %v", gwCounts, setCounts)
	}
}

// TestListenerSetPipeline runs a Gateway, two ListenerSets (one admitted,
// one in a namespace the Gateway does not admit) and routes through Build:
// the admitted ListenerSet's listener reaches the translator with the route
// naming the ListenerSet only, the Gateway counts one attached ListenerSet,
// each ListenerSet gets its status, and removing the Gateway's
// allowedListeners takes the listener away again.
func TestListenerSetPipeline(t *testing.T) {
	gw := lsGateway(allowFrom(gwv1.NamespacesFromSame, nil))
	gw.Spec.GatewayClassName = gwv1.ObjectName(seed.GatewayClassObject().Name)
	admitted := listenerSet("infra", "ls", 1, entry("extra", "extra.com", "", gwv1.NamespacesFromSame))
	refused := listenerSet("elsewhere", "ls", 1, entry("other", "other.com", "", ""))
	toSet := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "to-set", Generation: 1},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
			Group: ptr.To(gwv1.Group(GatewayGroup)), Kind: ptr.To(gwv1.Kind(ListenerSetKind)), Name: "ls"}}}}}
	toGW := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "to-gw", Generation: 1},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}}}}
	p := newPipeline(t, false, seed.GatewayClassObject(), gw, admitted, refused, toSet, toGW)

	describe := func() string {
		m := p.out.Models.GetKey(lsGW.String())
		var parts []string
		if m != nil {
			for _, l := range m.Listeners {
				var routes []string
				for _, r := range l.Routes {
					routes = append(routes, r.Name)
				}
				parts = append(parts, l.Name+"="+strings.Join(routes, ","))
			}
		}
		return strings.Join(parts, " ")
	}
	want := "gw-a=to-gw gw-b=to-gw infra/ls/extra=to-set"
	p.eventually("translator listeners", func() bool { return describe() == want },
		func() string { return "got " + describe() + ", want " + want })

	p.eventually("Gateway attachedListenerSets 1, its own 2 listeners", func() bool {
		gs := p.out.GatewayStatuses.GetKey(lsGW.String())
		return gs != nil && ptr.Deref(gs.Status.AttachedListenerSets, -1) == 1 && len(gs.Status.Listeners) == 2
	}, func() string { return fmt.Sprint(p.out.GatewayStatuses.GetKey(lsGW.String())) })
	p.eventually("ListenerSet infra/ls accepted, one route", func() bool {
		st := p.out.ListenerSetStatuses.GetKey("infra/ls")
		return st != nil && lsConds(st.Status.Conditions) == "Accepted=True/Accepted Programmed=False/Pending" &&
			len(st.Status.Listeners) == 1 && st.Status.Listeners[0].AttachedRoutes == 1
	}, func() string { return fmt.Sprint(p.out.ListenerSetStatuses.GetKey("infra/ls")) })
	p.eventually("ListenerSet elsewhere/ls NotAllowed", func() bool {
		st := p.out.ListenerSetStatuses.GetKey("elsewhere/ls")
		return st != nil && lsConds(st.Status.Conditions) == "Accepted=False/NotAllowed Programmed=False/NotAllowed"
	}, func() string { return fmt.Sprint(p.out.ListenerSetStatuses.GetKey("elsewhere/ls")) })
	p.eventually("route to-set accepted by the ListenerSet", func() bool {
		rs := p.routeStatus("infra", "to-set")
		return len(rs) == 1 && ptr.Deref(rs[0].ParentRef.Kind, "") == ListenerSetKind &&
			findCondition(rs[0].Conditions, "Accepted").Status == metav1.ConditionTrue
	}, func() string { return fmt.Sprint(p.routeStatus("infra", "to-set")) })

	gw = gw.DeepCopy()
	gw.Spec.AllowedListeners = nil
	p.add(gw)
	want = "gw-a=to-gw gw-b=to-gw"
	p.eventually("ListenerSet listener gone", func() bool { return describe() == want },
		func() string { return "got " + describe() + ", want " + want })
	p.eventually("ListenerSet NotAllowed", func() bool {
		st := p.out.ListenerSetStatuses.GetKey("infra/ls")
		return st != nil && lsConds(st.Status.Conditions) == "Accepted=False/NotAllowed Programmed=False/NotAllowed"
	}, func() string { return fmt.Sprint(p.out.ListenerSetStatuses.GetKey("infra/ls")) })
	p.eventually("route to-set not accepted", func() bool {
		rs := p.routeStatus("infra", "to-set")
		return len(rs) == 1 && findCondition(rs[0].Conditions, "Accepted").Reason == string(gwv1.RouteReasonNoMatchingParent)
	}, func() string { return fmt.Sprint(p.routeStatus("infra", "to-set")) })
}

func TestWithListenerSetPorts(t *testing.T) {
	gw := lsGateway(allowFrom(gwv1.NamespacesFromSame, nil))
	gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{Name: "listenerset-8080", Port: 9999, Protocol: gwv1.HTTPProtocolType})
	on := func(e gwv1.ListenerEntry, p gwv1.PortNumber) gwv1.ListenerEntry { e.Port = p; return e }
	v := viewWith(gw, CertificateLookups{}, nil,
		listenerSet("infra", "ls", 1, entry("same-port", "s.com", "", ""), on(entry("new", "n.com", "", ""), 8080),
			on(entry("new-too", "m.com", "", ""), 8080)),
		// Not accepted (its only listener conflicts): its port is not exposed.
		listenerSet("infra", "refused", 2, on(entry("dup", "n.com", "", ""), 8080)),
		listenerSet("other", "not-allowed", 3, on(entry("x", "x.com", "", ""), 7070)))
	out := WithListenerSetPorts(gw, v)
	var got []string
	for _, l := range out.Spec.Listeners[len(gw.Spec.Listeners):] {
		got = append(got, fmt.Sprintf("%s:%d", l.Name, l.Port))
	}
	if want := "listenerset-8080-1:8080"; strings.Join(got, " ") != want {
		t.Errorf("added listeners %v, want %s", got, want)
	}
	if len(gw.Spec.Listeners) != 3 {
		t.Errorf("input modified: %d listeners", len(gw.Spec.Listeners))
	}
	if plain := NewGatewayView(gw, CertificateLookups{}); WithListenerSetPorts(gw, plain) != gw {
		t.Error("without ListenerSets the Gateway is not returned as is")
	}
}
