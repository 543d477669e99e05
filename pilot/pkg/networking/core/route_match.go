// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// matchResult is one Gateway API match translated to an Envoy RouteMatch,
// with the facts route ordering and prefix rewrites need.
type matchResult struct {
	match *routev3.RouteMatch
	key   orderKey // only the match part (pathKind..queries) is set
	// prefix is the PathPrefix value (trailing "/" trimmed, "/" for the
	// root), "" for other path kinds; ReplacePrefixMatch rewrites it.
	prefix string
}

// httpMatch translates an HTTPRouteMatch (nil means the default: PathPrefix
// "/"):
//   - path Exact → RouteMatch.path; PathPrefix "/" → prefix "/"; other
//     PathPrefix → path_separated_prefix without trailing "/" (matches whole
//     path elements, as the Gateway API requires); RegularExpression →
//     safe_regex (RE2);
//   - headers → HeaderMatcher string_match exact or safe_regex; names are
//     case-insensitive and only the first of equal names counts;
//   - method → HeaderMatcher on ":method";
//   - queryParams → QueryParameterMatcher exact or safe_regex; only the
//     first of equal names counts.
//
// Unknown match types are an error (the controller rejects them first).
func httpMatch(m *gwv1.HTTPRouteMatch) (matchResult, error) {
	res, err := httpPath(m)
	if err != nil || m == nil {
		return res, err
	}
	rm := res.match
	hs := make([]headerMatch, len(m.Headers))
	for i, h := range m.Headers {
		hs[i] = headerMatch{string(h.Name), h.Value, string(deref(h.Type))}
	}
	if rm.Headers, err = headerMatchers(hs, string(gwv1.HeaderMatchExact), string(gwv1.HeaderMatchRegularExpression)); err != nil {
		return res, err
	}
	res.key.headers = len(rm.Headers)
	if m.Method != nil {
		rm.Headers = append(rm.Headers, &routev3.HeaderMatcher{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
			StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: string(*m.Method)}},
		}})
		res.key.method = true
	}

	seenQ := map[string]bool{}
	for _, q := range m.QueryParams {
		if seenQ[string(q.Name)] {
			continue
		}
		seenQ[string(q.Name)] = true
		regex := q.Type != nil && *q.Type == gwv1.QueryParamMatchRegularExpression
		if q.Type != nil && !regex && *q.Type != gwv1.QueryParamMatchExact {
			return res, fmt.Errorf("unsupported query parameter match type %q", *q.Type)
		}
		sm, err := stringMatcher(q.Value, regex)
		if err != nil {
			return res, err
		}
		rm.QueryParameters = append(rm.QueryParameters, &routev3.QueryParameterMatcher{
			Name: string(q.Name), QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: sm},
		})
	}
	res.key.queries = len(rm.QueryParameters)
	return res, nil
}

// grpcMatch translates a GRPCRouteMatch (nil means any method). gRPC's
// :path is "/<service>/<method>":
//   - service and method both Exact → path "/<service>/<method>";
//   - service Exact alone → prefix "/<service>/";
//   - method alone, or any RegularExpression → safe_regex
//     "/<service or [^/]+>/<method or [^/]+>", exact parts quoted;
//   - no method match → prefix "/".
//
// Headers are matched as for HTTPRoute.
func grpcMatch(m *gwv1.GRPCRouteMatch) (matchResult, error) {
	var res matchResult
	rm := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	res.match = rm
	res.key.pathKind, res.key.pathLen = pathGRPC, 0
	if m == nil {
		return res, nil
	}
	if mm := m.Method; mm != nil && (mm.Service != nil || mm.Method != nil) {
		regex := mm.Type != nil && *mm.Type == gwv1.GRPCMethodMatchRegularExpression
		if mm.Type != nil && !regex && *mm.Type != gwv1.GRPCMethodMatchExact {
			return res, fmt.Errorf("unsupported gRPC method match type %q", *mm.Type)
		}
		svc, meth := deref(mm.Service), deref(mm.Method)
		switch {
		case !regex && svc != "" && meth != "":
			p := "/" + svc + "/" + meth
			rm.PathSpecifier = &routev3.RouteMatch_Path{Path: p}
		case !regex && svc != "":
			p := "/" + svc + "/"
			rm.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: p}
		default:
			part := func(v string) string {
				switch {
				case v == "":
					return "[^/]+"
				case regex:
					return v
				default:
					return regexp.QuoteMeta(v)
				}
			}
			re := "/" + part(svc) + "/" + part(meth)
			if err := checkRegex(re); err != nil {
				return res, fmt.Errorf("gRPC method regular expression %q: %w", re, err)
			}
			rm.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}
		}
		res.key.pathLen = grpcPathLen(svc, meth)
	}
	hs := make([]headerMatch, len(m.Headers))
	for i, h := range m.Headers {
		hs[i] = headerMatch{string(h.Name), h.Value, string(deref(h.Type))}
	}
	var err error
	if rm.Headers, err = headerMatchers(hs, string(gwv1.GRPCHeaderMatchExact), string(gwv1.GRPCHeaderMatchRegularExpression)); err != nil {
		return res, err
	}
	res.key.headers = len(rm.Headers)
	return res, nil
}

// headerMatch is an HTTPHeaderMatch or GRPCHeaderMatch; typ "" means
// Exact.
type headerMatch struct{ name, value, typ string }

// headerMatchers translates header matches: names lowercased (header names
// are case-insensitive), only the first of equal names kept, values exact
// or safe_regex.
func headerMatchers(hs []headerMatch, exact, regexType string) ([]*routev3.HeaderMatcher, error) {
	var out []*routev3.HeaderMatcher
	seen := map[string]bool{}
	for _, h := range hs {
		name := strings.ToLower(h.name)
		if seen[name] {
			continue
		}
		seen[name] = true
		if h.typ != "" && h.typ != exact && h.typ != regexType {
			return nil, fmt.Errorf("unsupported header match type %q", h.typ)
		}
		sm, err := stringMatcher(h.value, h.typ == regexType)
		if err != nil {
			return nil, err
		}
		out = append(out, &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: sm}})
	}
	return out, nil
}

func stringMatcher(v string, regex bool) (*matcherv3.StringMatcher, error) {
	if !regex {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}, nil
	}
	if err := checkRegex(v); err != nil {
		return nil, fmt.Errorf("regular expression %q: %w", v, err)
	}
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: v}}}, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// httpPath translates the path part of an HTTPRouteMatch (see httpMatch).
func httpPath(m *gwv1.HTTPRouteMatch) (matchResult, error) {
	var res matchResult
	rm := &routev3.RouteMatch{}
	res.match = rm

	ptype, pval := gwv1.PathMatchPathPrefix, "/"
	if m != nil && m.Path != nil {
		if m.Path.Type != nil {
			ptype = *m.Path.Type
		}
		if m.Path.Value != nil {
			pval = *m.Path.Value
		}
	}
	switch ptype {
	case gwv1.PathMatchExact:
		rm.PathSpecifier = &routev3.RouteMatch_Path{Path: pval}
		res.key.pathKind, res.key.pathLen = pathExact, len(pval)
	case gwv1.PathMatchPathPrefix:
		p := strings.TrimRight(pval, "/")
		if p == "" {
			rm.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
			res.prefix = "/"
		} else {
			rm.PathSpecifier = &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: p}
			res.prefix = p
		}
		res.key.pathKind, res.key.pathLen = pathPrefix, len(res.prefix)
	case gwv1.PathMatchRegularExpression:
		if err := checkRegex(pval); err != nil {
			return res, fmt.Errorf("path regular expression %q: %w", pval, err)
		}
		rm.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: pval}}
		res.key.pathKind, res.key.pathLen = pathRegex, len(pval)
	default:
		return res, fmt.Errorf("unsupported path match type %q", ptype)
	}
	return res, nil
}
