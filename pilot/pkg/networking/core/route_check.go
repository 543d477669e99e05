// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// RuleProblem is why one rule of a route cannot be served as written: a
// match, filter or value that Envoy would refuse, or that the translator
// cannot express. Such a rule is left out of the Gateway's routes (the
// Gateway API's "Dropped Rule" approach of PartiallyInvalid), so its
// requests fall to the Gateway's other routes, and nothing else changes:
// the problem never reaches the validation of the Gateway's whole set.
type RuleProblem struct {
	// Rule is the rule's index in spec.rules.
	Rule int
	// Field is the Gateway API field path inside the rule, for example
	// "filters[0].requestHeaderModifier.set[1].value"; "" when the problem
	// is in what the rule translates to as a whole.
	Field string
	// Message says what is wrong, in Envoy's terms where Envoy refuses it.
	Message string
}

// String is "rule N: field: message", as route status messages name it.
func (p RuleProblem) String() string {
	if p.Field == "" {
		return fmt.Sprintf("rule %d: %s", p.Rule, p.Message)
	}
	return fmt.Sprintf("rule %d: %s: %s", p.Rule, p.Field, p.Message)
}

// CheckRoute translates every rule of r alone and returns, in rule order,
// the problem of each rule that cannot be served (nil when all can). It
// runs the same code BuildRouteConfigurations runs for a rule (buildRule),
// so a rule it accepts is one the translator serves and one it refuses is
// one the translator leaves out: the controller reports exactly what the
// proxies get. A rule's translation does not depend on the Gateway it is
// attached to, except for a redirect's default port, which cannot make a
// rule invalid; CheckRoute uses port 80.
func CheckRoute(r *model.Route, opts Options) []RuleProblem {
	opts = opts.WithDefaults()
	g := portGroup{port: 80}
	memo := anyMemo{}
	var out []RuleProblem
	for ri := range r.Rules {
		rule := &r.Rules[ri]
		if rule.Stream() {
			if p := checkStreamRule(rule, opts, memo); p != nil {
				out = append(out, *p)
			}
			continue
		}
		if _, p := buildRule(r, rule, g, opts, memo); p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// checkStreamRule translates a TLSRoute's or TCPRoute's rule into its TCP
// proxy (tcpProxyFilter, what buildStreamListener serves) and runs Envoy's
// proto validation on it.
func checkStreamRule(rule *model.Rule, opts Options, memo anyMemo) *RuleProblem {
	f, err := tcpProxyFilter("check", rule, false, opts)
	if err == nil {
		err = validateDeep(f, memo)
	}
	if err != nil {
		return &RuleProblem{Rule: rule.Index, Message: err.Error()}
	}
	return nil
}

// buildRule translates every match of one rule into its Envoy routes (a
// CORS preflight route before each route that needs one), or says why the
// rule cannot be served. The checks, in order:
//
//  1. header modifiers of the rule and of its backendRefs that Envoy
//     refuses (checkHeaderFilters), named by their Gateway API field;
//  2. every match translates (a regular expression RE2 refuses, an
//     unsupported match type);
//  3. the rule's action translates (filters, backends, timeout);
//  4. every route built passes Envoy's proto validation (validateDeep, with
//     every packed per-filter config) and the HeaderParser checks
//     (checkHeaderLists): what core.Validate would refuse in this route
//     is refused here, for this rule only.
func buildRule(r *model.Route, rule *model.Rule, g portGroup, opts Options, memo anyMemo) ([]routeEntry, *RuleProblem) {
	problem := func(field, format string, a ...any) *RuleProblem {
		return &RuleProblem{Rule: rule.Index, Field: field, Message: fmt.Sprintf(format, a...)}
	}
	if field, err := checkHeaderFilters(rule); err != nil {
		return nil, problem(field, "%v", err)
	}
	matches, p := ruleMatches(rule)
	if p != nil {
		return nil, p
	}
	var out []routeEntry
	for mi, m := range matches {
		rt, err := buildAction(r, rule, m, g, opts)
		if err != nil {
			return nil, problem("", "%v", err)
		}
		rt.Name = fmt.Sprintf("%s.%s.%d", r.Namespace, r.Name, rule.Index)
		rt.Match = m.match
		k := m.key
		k.created, k.nsName, k.kind = r.CreationTimestamp, r.Namespace+"/"+r.Name, r.Kind
		k.ruleIndex, k.match = rule.Index, mi
		pre, err := preflightRoute(rt)
		if err != nil {
			return nil, problem("", "CORS preflight route: %v", err)
		}
		for _, built := range []*routev3.Route{pre, rt} {
			if built == nil {
				continue
			}
			if err := checkBuiltRoute(built, memo); err != nil {
				return nil, problem("", "Envoy would refuse the translated route: %v", err)
			}
		}
		if pre != nil {
			pk := k
			pk.preflight = true
			out = append(out, routeEntry{key: pk, route: pre})
		}
		out = append(out, routeEntry{key: k, route: rt})
	}
	return out, nil
}

// ruleMatches translates the rule's matches (one match-all when it has
// none). A match that cannot be translated makes the whole rule a problem:
// the Gateway API's unit of validity is the rule, and serving the other
// matches would route only part of what the user wrote.
func ruleMatches(rule *model.Rule) ([]matchResult, *RuleProblem) {
	var out []matchResult
	switch {
	case rule.HTTP != nil:
		ms := rule.HTTP.Matches
		if len(ms) == 0 {
			ms = []gwv1.HTTPRouteMatch{{}}
		}
		for i := range ms {
			m, err := httpMatch(&ms[i])
			if err != nil {
				return nil, &RuleProblem{Rule: rule.Index, Field: fmt.Sprintf("matches[%d]", i), Message: err.Error()}
			}
			out = append(out, m)
		}
	case rule.GRPC != nil:
		ms := rule.GRPC.Matches
		if len(ms) == 0 {
			ms = []gwv1.GRPCRouteMatch{{}}
		}
		for i := range ms {
			m, err := grpcMatch(&ms[i])
			if err != nil {
				return nil, &RuleProblem{Rule: rule.Index, Field: fmt.Sprintf("matches[%d]", i), Message: err.Error()}
			}
			out = append(out, m)
		}
	default:
		return nil, &RuleProblem{Rule: rule.Index, Message: "the rule is neither an HTTPRoute nor a GRPCRoute rule"}
	}
	return out, nil
}

// checkBuiltRoute is core.Validate's per-route part (rules 1 and 6) for one
// translated route: Envoy's proto rules, including packed per-filter
// configs, and HeaderParser's refusals at the route and weighted cluster
// levels.
func checkBuiltRoute(rt *routev3.Route, memo anyMemo) error {
	if err := validateDeep(rt, memo); err != nil {
		return err
	}
	var errs []string
	fail := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	checkHeaderLists("route", rt, fail)
	for _, cw := range rt.GetRoute().GetWeightedClusters().GetClusters() {
		checkHeaderLists(fmt.Sprintf("weighted cluster %q", cw.GetName()), cw, fail)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// checkHeaderFilters finds the first header modifier, of the rule's
// filters and then of its backendRefs' filters, that Envoy refuses, and
// returns its field path:
//
//   - a value holding NUL, CR or LF: Envoy's HeaderValue value pattern
//     "^[^\x00\n\r]*$" (envoy/config/core/v3/base.proto); the Gateway API
//     CRDs allow any value;
//   - Host removed from a request, or Host set, added or removed on a
//     response: HeaderParser refuses host and ':'-prefixed names
//     (isEnvoyReservedHeader); a request Host set or add is served, as
//     host_rewrite_literal (see headerMods).
func checkHeaderFilters(rule *model.Rule) (string, error) {
	type named struct {
		at  string
		dir headerDirection
		f   *gwv1.HTTPHeaderFilter
	}
	var all []named
	collect := func(prefix string, i int, req, resp *gwv1.HTTPHeaderFilter) {
		if req != nil {
			all = append(all, named{fmt.Sprintf("%sfilters[%d].requestHeaderModifier", prefix, i), requestHeaders, req})
		}
		if resp != nil {
			all = append(all, named{fmt.Sprintf("%sfilters[%d].responseHeaderModifier", prefix, i), responseHeaders, resp})
		}
	}
	httpList := func(prefix string, fs []gwv1.HTTPRouteFilter) {
		for i := range fs {
			collect(prefix, i, fs[i].RequestHeaderModifier, fs[i].ResponseHeaderModifier)
		}
	}
	grpcList := func(prefix string, fs []gwv1.GRPCRouteFilter) {
		for i := range fs {
			collect(prefix, i, fs[i].RequestHeaderModifier, fs[i].ResponseHeaderModifier)
		}
	}
	if rule.HTTP != nil {
		httpList("", rule.HTTP.Filters)
	}
	if rule.GRPC != nil {
		grpcList("", rule.GRPC.Filters)
	}
	for j := range rule.Backends {
		prefix := fmt.Sprintf("backendRefs[%d].", j)
		httpList(prefix, rule.Backends[j].HTTPFilters)
		grpcList(prefix, rule.Backends[j].GRPCFilters)
	}
	for _, n := range all {
		for _, list := range []struct {
			op string
			hs []gwv1.HTTPHeader
		}{{"set", n.f.Set}, {"add", n.f.Add}} {
			for k, h := range list.hs {
				at := fmt.Sprintf("%s.%s[%d]", n.at, list.op, k)
				if isEnvoyReservedHeader(string(h.Name)) && (n.dir == responseHeaders || strings.HasPrefix(string(h.Name), ":")) {
					return at + ".name", fmt.Errorf("%s header %q cannot be %s: Envoy refuses ':'-prefixed and host headers in response header modifiers", n.dir, h.Name, verbOf(list.op))
				}
				if i := strings.IndexAny(h.Value, "\x00\r\n"); i >= 0 {
					return at + ".value", fmt.Errorf("header %q: the value holds %q at byte %d; Envoy refuses NUL, CR and LF in header values", h.Name, h.Value[i:i+1], i)
				}
			}
		}
		for k, name := range n.f.Remove {
			if isEnvoyReservedHeader(name) {
				return fmt.Sprintf("%s.remove[%d]", n.at, k), fmt.Errorf("%s header %q cannot be removed: Envoy refuses ':'-prefixed and host headers in headers_to_remove", n.dir, name)
			}
		}
	}
	return "", nil
}

func verbOf(op string) string {
	if op == "set" {
		return "set"
	}
	return "added"
}
