// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/seed"
)

// crlfRule is a rule whose RequestHeaderModifier value holds CR/LF: the
// CRD accepts it, Envoy refuses it.
func crlfRule() gwv1.HTTPRouteRule {
	r := seed.HTTPRoute().Spec.Rules[0]
	r.Filters = []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestHeaderModifier,
		RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "X-Tenant", Value: "a\r\nx-admin: true"}}}}}
	return r
}

// A route with one rule Envoy would refuse and one it accepts: the bad
// rule is left out of the translator's view, the route stays Accepted and
// gets PartiallyInvalid=True/UnsupportedValue naming the rule and field;
// when every rule is bad, the route is Accepted=False/UnsupportedValue,
// does not count in attachedRoutes, and gets no PartiallyInvalid; fixed,
// it is fully accepted again.
func TestRuleProblemsInRouteStatus(t *testing.T) {
	route := seed.HTTPRoute()
	good := route.Spec.Rules[0]
	route.Spec.Rules = []gwv1.HTTPRouteRule{good, crlfRule()}
	p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), route, seed.InferencePool(), seed.EPPService())
	gwKey := seed.GatewayNamespace + "/" + seed.GatewayName
	status := func() string {
		rs := p.routeStatus(seed.Namespace, seed.RouteName)
		if len(rs) != 1 {
			return fmt.Sprintf("%d parents", len(rs))
		}
		return conditionsOf(rs[0].Conditions)
	}
	condition := func(typ string) *metav1.Condition {
		rs := p.routeStatus(seed.Namespace, seed.RouteName)
		if len(rs) != 1 {
			return nil
		}
		return meta.FindStatusCondition(rs[0].Conditions, typ)
	}
	field := `rule 1: filters[0].requestHeaderModifier.set[0].value: header "X-Tenant"`
	p.eventually("PartiallyInvalid", func() bool {
		c := condition("PartiallyInvalid")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "UnsupportedValue" &&
			strings.HasPrefix(c.Message, "Dropped Rule(s): "+field)
	}, status)
	if s := status(); !strings.HasPrefix(s, "Accepted=True (Accepted)") {
		t.Errorf("route status %s, want Accepted=True with one rule dropped", s)
	}
	gw := p.out.Models.GetKey(gwKey)
	if gw == nil || len(gw.Listeners[0].Routes) != 1 {
		t.Fatalf("translator gateway %+v, want the route", gw)
	}
	if rules := gw.Listeners[0].Routes[0].Rules; len(rules) != 1 || rules[0].Index != 0 {
		t.Errorf("translator rules %+v, want only rule 0", rules)
	}

	route = route.DeepCopy()
	route.Generation = 2
	route.Spec.Rules = []gwv1.HTTPRouteRule{crlfRule()}
	p.add(route)
	p.eventually("Accepted=False", func() bool {
		c := condition("Accepted")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "UnsupportedValue" &&
			strings.HasPrefix(c.Message, "no rule of the route can be served: rule 0: filters[0].requestHeaderModifier.set[0].value")
	}, status)
	if s := status(); strings.Contains(s, "PartiallyInvalid") {
		t.Errorf("a fully invalid route has PartiallyInvalid: %s", s)
	}
	p.eventually("not attached", func() bool {
		gs := p.out.GatewayStatuses.GetKey(gwKey)
		gw := p.out.Models.GetKey(gwKey)
		return gs != nil && gs.Status.Listeners[0].AttachedRoutes == 0 && gw != nil && len(gw.Listeners[0].Routes) == 0
	}, func() string { return fmt.Sprint(p.out.GatewayStatuses.GetKey(gwKey), p.out.Models.GetKey(gwKey)) })

	route = route.DeepCopy()
	route.Generation = 3
	route.Spec.Rules = []gwv1.HTTPRouteRule{good}
	p.add(route)
	p.eventually("fixed", func() bool {
		return strings.HasPrefix(status(), "Accepted=True (Accepted)") && !strings.Contains(status(), "PartiallyInvalid")
	}, status)
}

func TestDroppedRulesMessageTruncates(t *testing.T) {
	rules := []RuleResult{{}, {Problem: "rule 1: " + strings.Repeat("é", 10000)}}
	m := DroppedRulesMessage(rules)
	if len(m) > maxProblemMessage || !strings.HasSuffix(m, " ... (truncated)") || !strings.HasPrefix(m, "Dropped Rule") {
		t.Errorf("message of %d bytes ending %q", len(m), m[len(m)-20:])
	}
	if !strings.Contains(m, "é ...") {
		t.Errorf("cut inside a UTF-8 sequence: %q", m[len(m)-24:])
	}
}

// A regular expression RE2 refuses no longer drops only its match while
// the route says Accepted=True and ResolvedRefs=True: the rule is dropped
// and the status names the match.
func TestInvalidRegexInRouteStatus(t *testing.T) {
	route := seed.HTTPRoute()
	bad := *route.Spec.Rules[0].DeepCopy()
	bad.Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchRegularExpression), Value: ptr.To("/(a")}}}
	route.Spec.Rules = append(route.Spec.Rules, bad)
	p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), route, seed.InferencePool(), seed.EPPService())
	var c *metav1.Condition
	p.eventually("PartiallyInvalid", func() bool {
		rs := p.routeStatus(seed.Namespace, seed.RouteName)
		if len(rs) != 1 {
			return false
		}
		c = meta.FindStatusCondition(rs[0].Conditions, string(gwv1.RouteConditionPartiallyInvalid))
		return c != nil && strings.HasPrefix(c.Message, "Dropped Rule(s): rule 1: matches[0]: ") && strings.Contains(c.Message, "missing closing )")
	}, func() string { return fmt.Sprintf("%+v", c) })
}
