// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// preflightRoute keeps CORS preflights away from a pool's EPP. Envoy's CORS
// filter answers a preflight itself with decoder_callbacks_->encodeHeaders
// (cors_filter.cc), and the filter manager sends that reply through every
// encoder filter from the start of the encoder chain (commonEncodePrefix
// with no filter, filter_manager.cc), so the ext_proc filter, although its
// decodeHeaders never ran, sees the reply: it merges the route's
// ExtProcPerRoute in encodeHeaders and opens an EPP stream whose first
// message is response_headers. On a FailClose pool an EPP error turns the
// preflight into a 500; on a FailOpen pool the EPP still gets a stream it
// cannot make sense of. The filter order does not help: with ext_proc first
// the EPP would see the preflight's request headers as well.
//
// For a rule's route that carries a CORS policy and an InferencePool's
// ext_proc override (on the route or on a weighted cluster), preflightRoute
// returns the route that goes just before it (orderKey.preflight): the
// same match restricted to what the CORS filter treats as a preflight
// (":method" OPTIONS, non-empty Origin and Access-Control-Request-Method),
// the same CORS policy with forward_not_matching_preflights false, so the
// CORS filter answers every such request itself (200, with
// access-control-allow-origin only for an allowed origin, which the Gateway
// API's CORS conformance accepts for a non-matching origin), and
// ExtProcPerRoute disabled with the weighted clusters' overrides removed,
// so ext_proc's encodeHeaders skips the reply (ext_proc.cc
// mergePerRouteConfig, allDisabledMode). The action is the rule's own and
// is not reached by a request this route matches; it stays a RouteAction
// because Envoy's CORS filter ignores routes without a route entry (a
// direct_response). nil when the rule needs none, or when its match
// requires another method (no preflight reaches it).
func preflightRoute(rt *routev3.Route) (*routev3.Route, error) {
	corsAny := rt.GetTypedPerFilterConfig()[FilterCORS]
	ra := rt.GetRoute()
	if corsAny == nil || ra == nil || !hasExtProc(rt) {
		return nil, nil
	}
	match, ok := preflightMatch(rt.GetMatch())
	if !ok {
		return nil, nil
	}
	policy := &corsv3.CorsPolicy{}
	if err := corsAny.UnmarshalTo(policy); err != nil {
		return nil, err
	}
	policy.ForwardNotMatchingPreflights = wrapperspb.Bool(false)
	corsOut, err := toAny(policy)
	if err != nil {
		return nil, err
	}
	disabled, err := toAny(&extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Disabled{Disabled: true}})
	if err != nil {
		return nil, err
	}
	out := proto.Clone(rt).(*routev3.Route)
	out.Match = match
	out.TypedPerFilterConfig = map[string]*anypb.Any{FilterCORS: corsOut, FilterExtProc: disabled}
	for _, cw := range out.GetRoute().GetWeightedClusters().GetClusters() {
		delete(cw.TypedPerFilterConfig, FilterExtProc)
		if len(cw.TypedPerFilterConfig) == 0 {
			cw.TypedPerFilterConfig = nil
		}
	}
	return out, nil
}

// hasExtProc reports whether the route enables ext_proc (an EPP) on the
// route or on any of its weighted clusters.
func hasExtProc(rt *routev3.Route) bool {
	if rt.GetTypedPerFilterConfig()[FilterExtProc] != nil {
		return true
	}
	for _, cw := range rt.GetRoute().GetWeightedClusters().GetClusters() {
		if cw.GetTypedPerFilterConfig()[FilterExtProc] != nil {
			return true
		}
	}
	return false
}

// preflightMatch is m restricted to CORS preflights as Envoy's CORS filter
// recognises them: method OPTIONS, Origin and Access-Control-Request-Method
// present and not empty. ok is false when m requires another method.
func preflightMatch(m *routev3.RouteMatch) (*routev3.RouteMatch, bool) {
	out := proto.Clone(m).(*routev3.RouteMatch)
	hasMethod := false
	for _, h := range out.GetHeaders() {
		if h.GetName() != ":method" {
			continue
		}
		if h.GetStringMatch().GetExact() != "OPTIONS" || h.GetInvertMatch() {
			return nil, false
		}
		hasMethod = true
	}
	if !hasMethod {
		out.Headers = append(out.Headers, exactHeader(":method", "OPTIONS"))
	}
	out.Headers = append(out.Headers, nonEmptyHeader("origin"), nonEmptyHeader("access-control-request-method"))
	return out, true
}

func exactHeader(name, value string) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: value}},
	}}
}

// nonEmptyHeader matches a header that is present with a non-empty value
// (the CORS filter treats an empty Origin as none).
func nonEmptyHeader(name string) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: ".+"}}},
	}}
}
