// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

var (
	limitsGW    = types.NamespacedName{Namespace: seed.GatewayNamespace, Name: seed.GatewayName}
	otherGW     = types.NamespacedName{Namespace: seed.GatewayNamespace, Name: "other"}
	limitsEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// weighted is a RouteResult in namespace ns named name, created at minute
// age, attached to gw (accepted), with one HTTP rule of matches matches of
// which regexes are path regexes.
func weighted(ns, name string, age, matches, regexes int, gw types.NamespacedName) RouteResult {
	re, prefix := gwv1.PathMatchRegularExpression, gwv1.PathMatchPathPrefix
	rule := &gwv1.HTTPRouteRule{}
	for i := range matches {
		typ := &prefix
		if i < regexes {
			typ = &re
		}
		rule.Matches = append(rule.Matches, gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: typ, Value: ptr.To("/x")}})
	}
	return RouteResult{
		Route:   Route{Kind: HTTPRouteKind, Namespace: ns, Name: name},
		Created: limitsEpoch.Add(time.Duration(age) * time.Minute),
		Parents: []ParentResult{{Gateway: gw, Accepted: true, Reason: gwv1.RouteReasonAccepted, Listeners: []gwv1.SectionName{"http"}}},
		Rules:   []RuleResult{{HTTP: rule}},
	}
}

func refusedNames(rs []routeRefusal) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Route)
	}
	return out
}

// A namespace past a limit loses its newest routes first, and every route
// newer than the first that does not fit (even one that would fit);
// other namespaces, routes on other Gateways, routes not accepted and
// rules left out count for nothing.
func TestTenantRefusals(t *testing.T) {
	l := TenantLimits{MaxMatches: 10, MaxRegexMatches: 4}
	leftOut := weighted("a", "left-out", 0, 8, 8, limitsGW)
	leftOut.Rules[0].Problem = "rule 0: refused"
	notAccepted := weighted("a", "not-accepted", 0, 8, 8, limitsGW)
	notAccepted.Parents[0].Accepted = false
	routes := []RouteResult{
		weighted("a", "a3", 3, 3, 0, limitsGW),
		weighted("a", "a1", 1, 4, 2, limitsGW),
		weighted("a", "a2", 2, 3, 0, limitsGW), // 10 matches so far: at the limit, served
		weighted("a", "a4", 4, 1, 0, limitsGW), // 11: refused
		weighted("a", "a5", 5, 0, 0, limitsGW), // would fit no more than a4: refused (newest first)
		leftOut, notAccepted,
		weighted("a", "elsewhere", 0, 9, 9, otherGW),
		weighted("b", "b1", 1, 9, 4, limitsGW),
		weighted("b", "b2", 2, 1, 1, limitsGW), // regexes 5 > 4: refused
		weighted("c", "c1", 1, 10, 4, limitsGW),
	}
	got := TenantRefusals(limitsGW, routes, l)
	want := []string{"HTTPRoute/a/a4", "HTTPRoute/a/a5", "HTTPRoute/b/b2"}
	if d := cmp.Diff(want, refusedNames(got)); d != "" {
		t.Fatalf("refused (-want +got):\n%s", d)
	}
	if m := got[0].Message; !strings.Contains(m, "at most 10 route matches (PILOT_MAX_ROUTE_MATCHES_PER_NAMESPACE)") ||
		!strings.Contains(m, "namespace a") || !strings.Contains(m, "(1 matches, 0 regular expressions)") ||
		!strings.Contains(m, "newest routes are refused first") || strings.Contains(m, "REGEX") {
		t.Errorf("a4's message: %s", m)
	}
	if m := got[2].Message; !strings.Contains(m, "at most 4 regular-expression matches (PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE)") {
		t.Errorf("b2's message: %s", m)
	}
	// A tie in age is broken by name; no limit refuses nothing.
	tie := []RouteResult{weighted("a", "y", 0, 6, 0, limitsGW), weighted("a", "x", 0, 6, 0, limitsGW)}
	if d := cmp.Diff([]string{"HTTPRoute/a/y"}, refusedNames(TenantRefusals(limitsGW, tie, l))); d != "" {
		t.Errorf("tie (-want +got):\n%s", d)
	}
	if rs := TenantRefusals(limitsGW, routes, TenantLimits{}); len(rs) != 0 {
		t.Errorf("no limits, refused %v", refusedNames(rs))
	}
}

// routeWeight counts every kind of regular expression and a rule without
// matches as one match.
func TestRouteWeight(t *testing.T) {
	re := gwv1.PathMatchRegularExpression
	hre, qre := gwv1.HeaderMatchRegularExpression, gwv1.QueryParamMatchRegularExpression
	mre, ghre := gwv1.GRPCMethodMatchRegularExpression, gwv1.GRPCHeaderMatchRegularExpression
	r := RouteResult{Rules: []RuleResult{
		{HTTP: &gwv1.HTTPRouteRule{}},
		{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{
			Path:        &gwv1.HTTPPathMatch{Type: &re, Value: ptr.To("/a.*")},
			Headers:     []gwv1.HTTPHeaderMatch{{Type: &hre, Name: "x", Value: ".*"}, {Name: "y", Value: "exact"}},
			QueryParams: []gwv1.HTTPQueryParamMatch{{Type: &qre, Name: "q", Value: ".*"}},
		}, {}}}},
		{GRPC: &gwv1.GRPCRouteRule{Matches: []gwv1.GRPCRouteMatch{{
			Method:  &gwv1.GRPCMethodMatch{Type: &mre, Service: ptr.To("a.*")},
			Headers: []gwv1.GRPCHeaderMatch{{Type: &ghre, Name: "x", Value: ".*"}},
		}}}},
		{GRPC: &gwv1.GRPCRouteRule{}},
	}}
	if m, x := routeWeight(&r); m != 5 || x != 5 {
		t.Errorf("weight %d matches, %d regexes; want 5, 5", m, x)
	}
	// A TLSRoute's rules select by server name: each rule counts one per
	// hostname (one without hostnames matches any, and counts one); a
	// TCPRoute rule counts one; a rule left out counts nothing.
	tls := RouteResult{Route: Route{Kind: TLSRouteKind, Hostnames: []gwv1.Hostname{"a.example.com", "b.example.com", "*.c.example.com"}},
		Rules: []RuleResult{{TLS: &gwv1.TLSRouteRule{}}, {TLS: &gwv1.TLSRouteRule{}}, {TLS: &gwv1.TLSRouteRule{}, Problem: "rule 2: refused"}}}
	if m, x := routeWeight(&tls); m != 6 || x != 0 {
		t.Errorf("TLSRoute weight %d matches, %d regexes; want 6, 0", m, x)
	}
	anyName := RouteResult{Route: Route{Kind: TLSRouteKind}, Rules: []RuleResult{{TLS: &gwv1.TLSRouteRule{}}}}
	if m, _ := routeWeight(&anyName); m != 1 {
		t.Errorf("TLSRoute without hostnames: weight %d matches, want 1", m)
	}
	tcp := RouteResult{Route: Route{Kind: TCPRouteKind}, Rules: []RuleResult{{TCP: &gwv1.TCPRouteRule{}}, {TCP: &gwv1.TCPRouteRule{}}}}
	if m, _ := routeWeight(&tcp); m != 2 {
		t.Errorf("TCPRoute weight %d matches, want 2", m)
	}
}

// Whatever one namespace's routes do (added, removed, grown, shrunk,
// recreated), the refusals of every other namespace stay the same: random
// routes of three namespaces, and 300 random changes of namespace a's.
func TestOneNamespaceNeverChangesAnothers(t *testing.T) {
	l := TenantLimits{MaxMatches: 20, MaxRegexMatches: 8}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(ns string, i int) RouteResult {
		m := rng.IntN(6)
		return weighted(ns, fmt.Sprintf("r%d", i), rng.IntN(50), m, rng.IntN(m+1), limitsGW)
	}
	var others []RouteResult
	for i := range 12 {
		others = append(others, random("b", i), random("c", i))
	}
	var a []RouteResult
	for i := range 12 {
		a = append(a, random("a", i))
	}
	notA := func(rs []routeRefusal) []string {
		var out []string
		for _, r := range rs {
			if !strings.HasPrefix(r.Route, "HTTPRoute/a/") {
				out = append(out, r.Key+": "+r.Message)
			}
		}
		return out
	}
	want := notA(TenantRefusals(limitsGW, slices.Concat(a, others), l))
	if len(want) == 0 {
		t.Fatal("the other namespaces are under their limits: the test shows nothing")
	}
	refusedA := 0
	for step := range 300 {
		switch i := rng.IntN(len(a) + 1); {
		case i == len(a):
			a = append(a, random("a", 100+step))
		case rng.IntN(3) == 0:
			a = slices.Delete(a, i, i+1)
		default:
			a[i] = random("a", i)
		}
		got := TenantRefusals(limitsGW, slices.Concat(a, others), l)
		if d := cmp.Diff(want, notA(got)); d != "" {
			t.Fatalf("step %d: another namespace's refusals changed (-before +after):\n%s", step, d)
		}
		refusedA += len(got) - len(want)
	}
	if refusedA == 0 {
		t.Fatal("namespace a was never over a limit: the test shows nothing")
	}
}

// limitRoute is route i of namespace ns on the seed Gateway: its own
// hostname, matches path regexes, created at minute age.
func limitRoute(ns string, i, matches, age int) *gwv1.HTTPRoute {
	r := benchRoute(0, i, "/")
	r.Namespace, r.Name = ns, fmt.Sprintf("%s-%d", ns, i)
	r.CreationTimestamp = metav1.NewTime(limitsEpoch.Add(time.Duration(age) * time.Minute))
	r.Spec.ParentRefs[0].Name = seed.GatewayName
	r.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(r.Name + ".example.com")}
	re := gwv1.PathMatchRegularExpression
	r.Spec.Rules[0].Matches = nil
	for j := range matches {
		r.Spec.Rules[0].Matches = append(r.Spec.Rules[0].Matches,
			gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: &re, Value: ptr.To(fmt.Sprintf("/m%d/.*", j))}})
	}
	r.Spec.Rules[0].BackendRefs[0].Namespace = ptr.To(gwv1.Namespace(seed.Namespace))
	return r
}

// Through the controller: namespace team-a past its regex limit gets
// Accepted=False/TooManyMatches on its newest routes, which leave the
// Translator's model and the Gateway's attachedRoutes; namespace team-b's
// statuses and *model.Route pointers do not move while team-a grows,
// shrinks back, and is then under its limit again.
func TestTenantLimitThroughTheController(t *testing.T) {
	grant := &gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "from-teams"},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "team-a"},
				{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "team-b"}},
			To: []gwv1.ReferenceGrantTo{{Kind: "Service"}},
		},
	}
	objs := []any{seed.GatewayClassObject(), seed.Gateway(), seed.EPPService(), grant}
	for i := range 3 {
		objs = append(objs, limitRoute("team-a", i, 2, i), limitRoute("team-b", i, 2, 10+i))
	}
	p := newLimitedPipeline(t, false, TenantLimits{MaxMatches: 100, MaxRegexMatches: 6}, objs...)
	gwKey := limitsGW.String()
	accepted := func(ns, name string) string {
		for _, ps := range p.routeStatus(ns, name) {
			if c := meta.FindStatusCondition(ps.Conditions, string(gwv1.RouteConditionAccepted)); c != nil {
				return string(c.Status) + "/" + c.Reason
			}
		}
		return "none"
	}
	models := func() map[string]*model.Route {
		out := map[string]*model.Route{}
		if gw := p.out.Translator.GetKey(gwKey); gw != nil && len(gw.Listeners) == 1 {
			for _, r := range gw.Listeners[0].Routes {
				out[r.Namespace+"/"+r.Name] = r
			}
		}
		return out
	}
	attached := func() int32 {
		if s := p.out.GatewayStatuses.GetKey(gwKey); s != nil && len(s.Status.Listeners) == 1 {
			return s.Status.Listeners[0].AttachedRoutes
		}
		return -1
	}
	describe := func() string {
		return fmt.Sprint(accepted("team-a", "team-a-0"), accepted("team-a", "team-a-2"), len(models()), attached())
	}
	p.eventually("six routes served, at the limit", func() bool { return len(models()) == 6 && attached() == 6 }, describe)
	bModels := map[string]*model.Route{}
	var bStatus []any
	for i := range 3 {
		key := fmt.Sprintf("team-b/team-b-%d", i)
		bModels[key] = models()[key]
		bStatus = append(bStatus, p.routeStatus("team-b", fmt.Sprintf("team-b-%d", i)))
	}
	checkB := func(when string) {
		t.Helper()
		m := models()
		for key, r := range bModels {
			if m[key] != r {
				t.Errorf("%s: %s has a new *model.Route (or none)", when, key)
			}
		}
		for i := range 3 {
			if d := cmp.Diff(bStatus[i], any(p.routeStatus("team-b", fmt.Sprintf("team-b-%d", i)))); d != "" {
				t.Errorf("%s: team-b-%d's status changed:\n%s", when, i, d)
			}
		}
	}

	// team-a's newest route grows by one regex: past the limit, refused.
	p.add(limitRoute("team-a", 2, 3, 2))
	p.eventually("team-a-2 refused", func() bool { return accepted("team-a", "team-a-2") == "False/TooManyMatches" }, describe)
	p.eventually("team-a-2 out of the model and of attachedRoutes", func() bool {
		_, in := models()["team-a/team-a-2"]
		return !in && attached() == 5
	}, describe)
	if st := p.routeStatus("team-a", "team-a-2"); !strings.Contains(conditionsOf(st[0].Conditions), "namespace team-a reach that") {
		t.Errorf("team-a-2's conditions: %s", conditionsOf(st[0].Conditions))
	}
	if a := accepted("team-a", "team-a-1"); a != "True/Accepted" {
		t.Errorf("team-a-1 (older) is %s, want accepted", a)
	}
	checkB("team-a over its limit")

	// A newer route of team-a is refused too; an older one growing moves
	// the cut to it, refusing every newer one.
	p.add(limitRoute("team-a", 3, 1, 3))
	p.add(limitRoute("team-a", 0, 5, 0))
	p.eventually("team-a-1, -2 and -3 refused", func() bool {
		return accepted("team-a", "team-a-0") == "True/Accepted" && accepted("team-a", "team-a-1") == "False/TooManyMatches" &&
			accepted("team-a", "team-a-2") == "False/TooManyMatches" && accepted("team-a", "team-a-3") == "False/TooManyMatches"
	}, describe)
	checkB("team-a's older route grown")

	// Back under: everything accepted again.
	p.add(limitRoute("team-a", 0, 1, 0))
	p.add(limitRoute("team-a", 2, 1, 2))
	p.eventually("team-a accepted again", func() bool {
		for i := range 4 {
			if accepted("team-a", fmt.Sprintf("team-a-%d", i)) != "True/Accepted" {
				return false
			}
		}
		return len(models()) == 7 && attached() == 7
	}, describe)
	checkB("team-a back under its limit")
}
