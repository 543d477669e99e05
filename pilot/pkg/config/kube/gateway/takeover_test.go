// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// sharedGateway is infra/shared: one HTTP listener on port 80 for each
// hostname ("" for none), named l0, l1, ..., routes from every namespace,
// ListenerSets from every namespace; with no hostname, one listener on
// port 8080.
func sharedGateway(hostnames ...string) *gwv1.Gateway {
	all := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}}
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "shared", Generation: 1},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(seed.GatewayClassObject().Name),
			AllowedListeners: allowFrom(gwv1.NamespacesFromAll, nil)},
	}
	for i, h := range hostnames {
		l := gwv1.Listener{Name: gwv1.SectionName(fmt.Sprintf("l%d", i)), Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: all}
		if h != "" {
			l.Hostname = ptr.To(gwv1.Hostname(h))
		}
		gw.Spec.Listeners = append(gw.Spec.Listeners, l)
	}
	if len(hostnames) == 0 { // a Gateway has at least one listener
		gw.Spec.Listeners = []gwv1.Listener{{Name: "elsewhere", Port: 8080, Protocol: gwv1.HTTPProtocolType}}
	}
	return gw
}

// sharedSet is a ListenerSet of infra/shared in ns, created created
// seconds after lsEpoch, with one listener per hostname named s0, s1, ...,
// routes from every namespace.
func sharedSet(ns, name string, created int, hostnames ...string) *gwv1.ListenerSet {
	var entries []gwv1.ListenerEntry
	for i, h := range hostnames {
		entries = append(entries, entry(fmt.Sprintf("s%d", i), h, "", gwv1.NamespacesFromAll))
	}
	ls := listenerSet(ns, name, created, entries...)
	ls.Spec.ParentRef = gwv1.ParentGatewayReference{Name: "shared", Namespace: ptr.To(gwv1.Namespace("infra"))}
	return ls
}

// hostRoute is an HTTPRoute in ns with hostnames, one rule and no backend,
// through parentRef (kind Gateway, or ListenerSet when set is true) to
// parent, narrowed to sectionName when not "".
func hostRoute(ns, name string, set bool, parent types.NamespacedName, sectionName string, hostnames ...string) *gwv1.HTTPRoute {
	ref := gwv1.ParentReference{Name: gwv1.ObjectName(parent.Name), Namespace: ptr.To(gwv1.Namespace(parent.Namespace))}
	if set {
		ref.Group, ref.Kind = ptr.To(gwv1.Group(GatewayGroup)), ptr.To(gwv1.Kind(ListenerSetKind))
	}
	if sectionName != "" {
		ref.SectionName = ptr.To(gwv1.SectionName(sectionName))
	}
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{ref}},
			Rules: []gwv1.HTTPRouteRule{{}}}}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwv1.Hostname(h))
	}
	return r
}

var sharedKey = types.NamespacedName{Namespace: "infra", Name: "shared"}

// servedBy translates infra/shared and returns, per virtual host of its
// port-80 route configuration, the namespaces/names of the routes it
// serves, sorted ("-" when none).
func servedBy(p *pipeline) map[string]string {
	m := p.out.Models.GetKey(sharedKey.String())
	if m == nil {
		return nil
	}
	rcs, err := core.BuildRouteConfigurations(m, core.Options{ClusterDomain: "cluster.local"})
	if err != nil {
		p.t.Fatalf("translating: %v", err)
	}
	out := map[string]string{}
	for _, rc := range rcs {
		for _, vh := range rc.GetVirtualHosts() {
			var routes []string
			for _, r := range vh.GetRoutes() {
				ns, rest, _ := strings.Cut(r.GetName(), ".")
				name, _, _ := strings.Cut(rest, ".")
				if n := ns + "/" + name; !slices.Contains(routes, n) {
					routes = append(routes, n)
				}
			}
			sort.Strings(routes)
			if len(routes) == 0 {
				routes = []string{"-"}
			}
			out[vh.GetDomains()[0]] = strings.Join(routes, ",")
		}
	}
	return out
}

// TestListenerHostnamePrecedence: a request goes to the listener whose
// hostname matches it best (exact, then the wildcard with the most labels,
// then the listener without hostname), the same whether those listeners
// are the Gateway's own or its ListenerSets': the arrangement is mirrored
// and each hostname goes to the same route. Status says it: the route on
// the broader listener is Conflicted for the hostname it loses, naming the
// listener that serves it, and that listener says TakesHostnames.
func TestListenerHostnamePrecedence(t *testing.T) {
	// Each listener gets one route (namespace "t<i>", the listener's
	// tenant), claiming every hostname below through it.
	claimed := []string{"abc.foo.example.com", "x.foo.example.com", "y.example.com", "other.org"}
	want := map[string]string{ // hostname -> the route that serves it
		"abc.foo.example.com": "t3/r", // exact
		"x.foo.example.com":   "t2/r", // *.foo.example.com has more labels than *.example.com
		"y.example.com":       "t1/r", // *.example.com
		"other.org":           "t0/r", // the listener without hostname
	}
	hostnames := []string{"", "*.example.com", "*.foo.example.com", "abc.foo.example.com"}
	for _, arrangement := range []struct {
		name  string
		onSet []bool // listener i is on a ListenerSet (in namespace t<i>)
	}{
		{"Gateway broad, ListenerSets specific", []bool{false, false, true, true}},
		{"Gateway specific, ListenerSets broad", []bool{true, true, false, false}},
		{"all on the Gateway", []bool{false, false, false, false}},
		{"all on ListenerSets", []bool{true, true, true, true}},
	} {
		t.Run(arrangement.name, func(t *testing.T) {
			var gwHosts []string
			objs := []any{seed.GatewayClassObject()}
			var routes []*gwv1.HTTPRoute
			for i, h := range hostnames {
				tenant := fmt.Sprintf("t%d", i)
				if arrangement.onSet[i] {
					objs = append(objs, sharedSet(tenant, "ls", i, h))
					routes = append(routes, hostRoute(tenant, "r", true, types.NamespacedName{Namespace: tenant, Name: "ls"}, "", claimed...))
					continue
				}
				routes = append(routes, hostRoute(tenant, "r", false, sharedKey, fmt.Sprintf("l%d", len(gwHosts)), claimed...))
				gwHosts = append(gwHosts, h)
			}
			objs = append(objs, sharedGateway(gwHosts...))
			for _, r := range routes {
				objs = append(objs, r)
			}
			p := newPipeline(t, false, objs...)
			describe := func() string { return fmt.Sprint(servedBy(p)) }
			p.eventually("each hostname served by its most specific listener's route", func() bool {
				got := servedBy(p)
				for h, r := range want {
					if got[h] != r {
						return false
					}
				}
				return true
			}, describe)
			// Status: t0's route (on "") loses every claimed hostname but
			// other.org; t3's loses none.
			p.eventually("t0's route is Conflicted for the three hostnames others serve", func() bool {
				rs := p.routeStatus("t0", "r")
				if len(rs) != 1 {
					return false
				}
				c := findCondition(rs[0].Conditions, RouteConflictedCondition)
				return c.Status == metav1.ConditionTrue && c.Reason == string(gwv1.ListenerReasonHostnameConflict) &&
					strings.Contains(c.Message, "requests for abc.foo.example.com") && strings.Contains(c.Message, "requests for x.foo.example.com") &&
					strings.Contains(c.Message, "requests for y.example.com") && !strings.Contains(c.Message, "other.org") &&
					findCondition(rs[0].Conditions, "Accepted").Status == metav1.ConditionTrue
			}, func() string { return conditionsOf(p.routeStatus("t0", "r")[0].Conditions) })
			p.eventually("t3's route keeps its hostname", func() bool {
				rs := p.routeStatus("t3", "r")
				return len(rs) == 1 && findCondition(rs[0].Conditions, "Accepted").Status == metav1.ConditionTrue &&
					findCondition(rs[0].Conditions, RouteConflictedCondition).Type == ""
			}, func() string { return fmt.Sprint(p.routeStatus("t3", "r")) })
			// The exact listener takes abc.foo.example.com from the three
			// broader listeners' routes, wherever it is.
			p.eventually("the exact listener says TakesHostnames", func() bool {
				c := takesCondition(p, arrangement.onSet[3], "t3/ls", "abc.foo.example.com")
				return c.Status == metav1.ConditionTrue && strings.HasPrefix(c.Message, "takes abc.foo.example.com from 3 route(s)")
			}, func() string {
				return fmt.Sprint(takesCondition(p, arrangement.onSet[3], "t3/ls", "abc.foo.example.com"))
			})
		})
	}
}

// takesCondition is the TakesHostnames condition of the listener with
// hostname host: of ListenerSet set (its only listener) when onSet, else of
// infra/shared.
func takesCondition(p *pipeline, onSet bool, set, host string) metav1.Condition {
	if onSet {
		st := p.out.ListenerSetStatuses.GetKey(set)
		if st == nil || len(st.Status.Listeners) != 1 {
			return metav1.Condition{}
		}
		return findCondition(st.Status.Listeners[0].Conditions, TakesHostnamesCondition)
	}
	gs := p.out.GatewayStatuses.GetKey(sharedKey.String())
	gw := p.out.Gateways.GetKey(sharedKey.String())
	if gs == nil || gw == nil {
		return metav1.Condition{}
	}
	for i, l := range gw.Listeners {
		if l.Hostname == host && i < len(gs.Status.Listeners) {
			return findCondition(gs.Status.Listeners[i].Conditions, TakesHostnamesCondition)
		}
	}
	return metav1.Condition{}
}

// TestHostnameTakeoverBetweenTenants: team-a serves a.example.com through
// the shared Gateway's listener without hostname; team-b adds a ListenerSet
// listener for a.example.com. Requests go to team-b (listener isolation),
// and both sides say so: team-a's route Conflicted=True/HostnameConflict
// naming team-b's listener, team-b's listener TakesHostnames=True naming
// the hostname but not team-a's route. The same ListenerSet in team-a's
// own namespace, or a team-a route attached to the ListenerSet too, is no
// take-over. Deleting team-b's ListenerSet gives the hostname back.
func TestHostnameTakeoverBetweenTenants(t *testing.T) {
	routeA := hostRoute("team-a", "a", false, sharedKey, "", "a.example.com")
	setB := sharedSet("team-b", "b", 1, "a.example.com")
	routeB := hostRoute("team-b", "b", true, types.NamespacedName{Namespace: "team-b", Name: "b"}, "")
	p := newPipeline(t, false, seed.GatewayClassObject(), sharedGateway(""), routeA, setB, routeB)

	p.eventually("a.example.com served to team-b", func() bool { return servedBy(p)["a.example.com"] == "team-b/b" },
		func() string { return fmt.Sprint(servedBy(p)) })
	p.eventually("team-a's route: Accepted, Conflicted naming team-b's listener", func() bool {
		rs := p.routeStatus("team-a", "a")
		if len(rs) != 1 {
			return false
		}
		c := findCondition(rs[0].Conditions, RouteConflictedCondition)
		return findCondition(rs[0].Conditions, "Accepted").Status == metav1.ConditionTrue &&
			c.Status == metav1.ConditionTrue && c.Reason == string(gwv1.ListenerReasonHostnameConflict) &&
			strings.HasPrefix(c.Message, `requests for a.example.com, which this route claims through listener l0, go to listener s0 of ListenerSet team-b/b, whose hostname "a.example.com" is more specific`)
	}, func() string { return fmt.Sprint(p.routeStatus("team-a", "a")) })
	p.eventually("team-b's listener: TakesHostnames, not naming team-a's route", func() bool {
		c := takesCondition(p, true, "team-b/b", "a.example.com")
		return c.Status == metav1.ConditionTrue && c.Reason == string(gwv1.ListenerReasonHostnameConflict) &&
			strings.HasPrefix(c.Message, "takes a.example.com from 1 route(s) of other namespaces") && !strings.Contains(c.Message, "team-a")
	}, func() string { return fmt.Sprint(p.out.ListenerSetStatuses.GetKey("team-b/b")) })
	p.eventually("the Gateway's own listener takes nothing", func() bool {
		gs := p.out.GatewayStatuses.GetKey(sharedKey.String())
		return gs != nil && len(gs.Status.Listeners) == 1 &&
			findCondition(gs.Status.Listeners[0].Conditions, TakesHostnamesCondition).Type == ""
	}, func() string { return fmt.Sprint(p.out.GatewayStatuses.GetKey(sharedKey.String())) })

	// team-a attaches to team-b's ListenerSet too: it is served there,
	// nothing is taken from it.
	both := routeA.DeepCopy()
	both.Spec.ParentRefs = append(both.Spec.ParentRefs, hostRoute("", "", true, types.NamespacedName{Namespace: "team-b", Name: "b"}, "").Spec.ParentRefs[0])
	p.add(both)
	p.eventually("no take-over of a route attached to both", func() bool {
		rs := p.routeStatus("team-a", "a")
		return len(rs) == 2 && findCondition(rs[0].Conditions, RouteConflictedCondition).Type == "" &&
			findCondition(rs[1].Conditions, RouteConflictedCondition).Type == "" &&
			takesCondition(p, true, "team-b/b", "a.example.com").Type == ""
	}, func() string { return fmt.Sprint(p.routeStatus("team-a", "a")) })
	p.add(routeA)

	// Deleting the ListenerSet gives a.example.com back to team-a.
	p.sets.DeleteObject("team-b/b")
	p.eventually("a.example.com served to team-a again", func() bool { return servedBy(p)["a.example.com"] == "team-a/a" },
		func() string { return fmt.Sprint(servedBy(p)) })
	p.eventually("team-a's route no longer Conflicted", func() bool {
		rs := p.routeStatus("team-a", "a")
		return len(rs) == 1 && findCondition(rs[0].Conditions, RouteConflictedCondition).Type == ""
	}, func() string { return fmt.Sprint(p.routeStatus("team-a", "a")) })

	// The same ListenerSet in team-a's own namespace: listener isolation
	// between one tenant's own listeners, no condition.
	p.add(sharedSet("team-a", "mine", 1, "a.example.com"))
	p.eventually("a.example.com owned by team-a's own ListenerSet listener", func() bool {
		// No route is attached to that listener: no virtual host serves
		// a.example.com (or an empty one), a 404.
		got, ok := servedBy(p)["a.example.com"]
		return !ok || got == "-"
	}, func() string { return fmt.Sprint(servedBy(p)) })
	p.eventually("no condition within one namespace", func() bool {
		rs := p.routeStatus("team-a", "a")
		return len(rs) == 1 && findCondition(rs[0].Conditions, RouteConflictedCondition).Type == ""
	}, func() string { return fmt.Sprint(p.routeStatus("team-a", "a")) })
}

// TestListenerTakeovers: the summary per taking listener counts each route
// once, sorts and de-duplicates hostnames, and ignores other Gateways'
// results.
func TestListenerTakeovers(t *testing.T) {
	set := types.NamespacedName{Namespace: "team-b", Name: "b"}
	other := types.NamespacedName{Namespace: "infra", Name: "other"}
	taken := func(h string, set types.NamespacedName, name gwv1.SectionName) TakenHostname {
		return TakenHostname{Hostname: h, Through: "l0", BySet: set, ByName: name}
	}
	results := [][]ParentResult{
		{{Gateway: sharedKey, Accepted: true, Taken: []TakenHostname{taken("b.example.com", set, "s0"), taken("a.example.com", set, "s0")}},
			{Gateway: sharedKey, Accepted: true, Taken: []TakenHostname{taken("a.example.com", set, "s0")}}},
		{{Gateway: sharedKey, Accepted: true, Taken: []TakenHostname{taken("a.example.com", set, "s0"), taken("c.example.com", types.NamespacedName{}, "l1")}}},
		{{Gateway: other, Accepted: true, Taken: []TakenHostname{taken("z.example.com", set, "s0")}}},
	}
	got := ListenerTakeovers(sharedKey, results)
	if s0 := got[set]["s0"]; !slices.Equal(s0.Hostnames, []string{"a.example.com", "b.example.com"}) || s0.Routes != 2 {
		t.Errorf("s0 = %+v, want a.example.com, b.example.com from 2 routes", s0)
	}
	if l1 := got[types.NamespacedName{}]["l1"]; !slices.Equal(l1.Hostnames, []string{"c.example.com"}) || l1.Routes != 1 {
		t.Errorf("the Gateway's l1 = %+v, want c.example.com from 1 route", l1)
	}
}
