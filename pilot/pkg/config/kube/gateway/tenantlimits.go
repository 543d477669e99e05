// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// TenantLimits bound what the routes of one namespace put into one
// Gateway: every route configuration of a Gateway is shared by every
// namespace whose routes attach to it, so without a bound one namespace's
// volume is everyone's cost (each change of anyone's route rebuilds,
// validates and sends the whole configuration to every proxy of the
// Gateway). Zero means no limit.
type TenantLimits struct {
	// MaxMatches is PILOT_MAX_ROUTE_MATCHES_PER_NAMESPACE: route matches,
	// each one Envoy route (a rule without matches counts one), and for
	// TLSRoutes and TCPRoutes what selects their rules: each hostname of
	// a TLSRoute (one server name of a filter chain) per rule, one per
	// TCPRoute rule.
	MaxMatches int
	// MaxRegexMatches is PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE: regular
	// expressions in matches (HTTPRoute path, header and query parameter
	// matches of type RegularExpression; GRPCRoute method and header ones),
	// which cost Envoy and us most per match.
	MaxRegexMatches int
}

func (l TenantLimits) enabled() bool { return l.MaxMatches > 0 || l.MaxRegexMatches > 0 }

// LimitsOf are the limits the feature flags set.
func LimitsOf(f features.Features) TenantLimits {
	return TenantLimits{MaxMatches: f.MaxRouteMatchesPerNamespace, MaxRegexMatches: f.MaxRegexMatchesPerNamespace}
}

// RouteReasonTooManyMatches is the reason of Accepted=False on a route's
// parent when the routes of its namespace on that Gateway would exceed
// TenantLimits. The Gateway API lists no reason for a limit on routes
// (its nearest, ListenerSet's TooManyListeners, names the same kind of
// refusal), and allows others; the message says which limit and how the
// routes refused are chosen.
const RouteReasonTooManyMatches gwv1.RouteConditionReason = "TooManyMatches"

// routeWeight is what a route puts into a Gateway's configuration: the
// matches and regular expressions of its rules that are served (a rule
// left out, Problem set, puts nothing). A TLSRoute rule counts one match
// per hostname of the route (at least one: no hostname matches any
// server name), a TCPRoute rule one.
func routeWeight(r *RouteResult) (matches, regexes int) {
	for _, rule := range r.Rules {
		if rule.Problem != "" {
			continue
		}
		switch {
		case rule.HTTP != nil:
			matches += max(1, len(rule.HTTP.Matches))
			for _, m := range rule.HTTP.Matches {
				if m.Path != nil && m.Path.Type != nil && *m.Path.Type == gwv1.PathMatchRegularExpression {
					regexes++
				}
				for _, h := range m.Headers {
					if h.Type != nil && *h.Type == gwv1.HeaderMatchRegularExpression {
						regexes++
					}
				}
				for _, q := range m.QueryParams {
					if q.Type != nil && *q.Type == gwv1.QueryParamMatchRegularExpression {
						regexes++
					}
				}
			}
		case rule.TLS != nil:
			matches += max(1, len(r.Route.Hostnames))
		case rule.TCP != nil:
			matches++
		case rule.GRPC != nil:
			matches += max(1, len(rule.GRPC.Matches))
			for _, m := range rule.GRPC.Matches {
				if m.Method != nil && m.Method.Type != nil && *m.Method.Type == gwv1.GRPCMethodMatchRegularExpression {
					regexes++
				}
				for _, h := range m.Headers {
					if h.Type != nil && *h.Type == gwv1.GRPCHeaderMatchRegularExpression {
						regexes++
					}
				}
			}
		}
	}
	return matches, regexes
}

// routeRefusal is one route not accepted by one Gateway for TenantLimits.
type routeRefusal struct {
	Key     string // Route, then the Gateway
	Route   string // RouteResult.ResourceName
	Gateway types.NamespacedName
	Message string
}

func (r routeRefusal) ResourceName() string { return r.Key }

// TenantRefusals decides which of routes (those naming gw) gw does not
// accept for limits: per namespace, the routes attached to gw are taken
// oldest first (creationTimestamp, then kind and name), and the first one
// whose matches or regular expressions would take the namespace's total
// past a limit is refused, with every newer one. So a namespace over a
// limit loses its newest routes first, and what one namespace holds never
// changes what another's routes get. It returns the refusals sorted by
// route.
func TenantRefusals(gw types.NamespacedName, routes []RouteResult, l TenantLimits) []routeRefusal {
	if !l.enabled() {
		return nil
	}
	byNamespace := map[string][]*RouteResult{}
	for i := range routes {
		r := &routes[i]
		if slices.ContainsFunc(r.Parents, func(p ParentResult) bool { return p.Accepted && p.Gateway == gw }) {
			byNamespace[r.Route.Namespace] = append(byNamespace[r.Route.Namespace], r)
		}
	}
	var out []routeRefusal
	for ns, rs := range byNamespace {
		slices.SortFunc(rs, func(a, b *RouteResult) int {
			return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Route.Kind, b.Route.Kind),
				strings.Compare(a.Route.Name, b.Route.Name))
		})
		var matches, regexes int
		var over string // the limits exceeded, once the cut is found
		for _, r := range rs {
			m, x := routeWeight(r)
			if over == "" {
				matches, regexes = matches+m, regexes+x
				over = exceeded(l, matches, regexes)
				if over == "" {
					continue
				}
			}
			out = append(out, routeRefusal{
				Key: r.ResourceName() + " " + gw.String(), Route: r.ResourceName(), Gateway: gw,
				Message: fmt.Sprintf("Gateway %s takes at most %s from the routes of one namespace, and the routes of "+
					"namespace %s reach that with this one or an older one (the newest routes are refused first): "+
					"this route (%d matches, %d regular expressions) is not served by that Gateway",
					gw, over, ns, m, x),
			})
		}
	}
	slices.SortFunc(out, func(a, b routeRefusal) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// exceeded names the limits that totals go past ("" when none).
func exceeded(l TenantLimits, matches, regexes int) string {
	var over []string
	if l.MaxMatches > 0 && matches > l.MaxMatches {
		over = append(over, fmt.Sprintf("%d route matches (PILOT_MAX_ROUTE_MATCHES_PER_NAMESPACE)", l.MaxMatches))
	}
	if l.MaxRegexMatches > 0 && regexes > l.MaxRegexMatches {
		over = append(over, fmt.Sprintf("%d regular-expression matches (PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE)", l.MaxRegexMatches))
	}
	return strings.Join(over, " and ")
}

// withRefusals returns r with every parent on a Gateway of refused not
// accepted (RouteReasonTooManyMatches, attached to no listener); r itself
// is not changed.
func withRefusals(r RouteResult, refused []routeRefusal) RouteResult {
	if len(refused) == 0 {
		return r
	}
	r.Parents = slices.Clone(r.Parents)
	for i := range r.Parents {
		p := &r.Parents[i]
		k := slices.IndexFunc(refused, func(f routeRefusal) bool { return f.Gateway == p.Gateway })
		if k < 0 || !p.Accepted {
			continue
		}
		p.Accepted, p.Reason, p.Message, p.Listeners = false, RouteReasonTooManyMatches, refused[k].Message, nil
	}
	return r
}

// limitRoutes is routes with TenantLimits applied: per Gateway of
// gateways, the refusals of the routes naming it (TenantRefusals, from
// routes as resolved), and per route, its parents on Gateways that refuse
// it not accepted (withRefusals). A change of one namespace's routes
// recomputes its Gateway's refusals; only routes whose refusals changed
// (besides the changed routes) are recomputed. With no limit, routes.
func limitRoutes(routes krt.Collection[RouteResult], gateways krt.Collection[GatewayView], l TenantLimits,
	with func(string) []krt.CollectionOption,
) krt.Collection[RouteResult] {
	if !l.enabled() {
		return routes
	}
	byGateway := krt.NewIndex(routes, "resolved-routes-by-gateway", func(r RouteResult) []types.NamespacedName {
		return gatewaysOf(r.Parents)
	})
	refusals := krt.NewManyCollection(gateways, func(ctx krt.HandlerContext, gw GatewayView) []routeRefusal {
		return TenantRefusals(gw.Gateway, byGateway.Fetch(ctx, gw.Gateway), l)
	}, with("TenantRefusals")...)
	byRoute := krt.NewIndex(refusals, "tenant-refusals-by-route", func(r routeRefusal) []string { return []string{r.Route} })
	return krt.NewCollection(routes, func(ctx krt.HandlerContext, r RouteResult) *RouteResult {
		out := withRefusals(r, byRoute.Fetch(ctx, r.ResourceName()))
		return &out
	}, with("Routes")...)
}
