// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"fmt"
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// selectVirtualHost is Envoy's virtual host search for host (already
// lowercased, port stripped): exact domain, then the longest "*suffix",
// then the longest "prefix*", then "*". Wildcards never match the empty
// string.
func (t *routeTable) selectVirtualHost(host string) *virtualHost {
	if t.ignorePort {
		// RouteMatcher::findVirtualHost: the host up to its port's start,
		// numeric or not.
		if i := hostPortStart(host); i >= 0 {
			host = host[:i]
		}
	}
	if vh := t.exact[host]; vh != nil {
		return vh
	}
	for _, w := range t.suffix {
		if len(host) > len(w.part) && strings.HasSuffix(host, w.part) {
			return w.vh
		}
	}
	for _, w := range t.prefix {
		if len(host) > len(w.part) && strings.HasPrefix(host, w.part) {
			return w.vh
		}
	}
	return t.star
}

// matchRoute is RouteMatcher::route: the virtual host by :authority, then
// its first route whose match accepts the request (vh or r nil when none).
// The Host is taken as it is now: the connection manager already stripped
// its port when strip_any_host_port is set (stripHostPort), and the route
// table leaves the port out of the match when it sets
// ignore_port_in_host_matching (selectVirtualHost).
func (t *routeTable) matchRoute(req *extproc.Request) (*virtualHost, *route) {
	vh := t.selectVirtualHost(strings.ToLower(req.Authority))
	if vh == nil {
		return nil, nil
	}
	return vh, vh.selectRoute(req)
}

// selectRoute returns the first route of vh whose match accepts the
// request, or nil.
func (vh *virtualHost) selectRoute(req *extproc.Request) *route {
	for _, r := range vh.routes {
		if r.match.matches(req) {
			return r
		}
	}
	return nil
}

type routeMatch struct {
	kind       string // prefix, path, safe_regex, path_separated_prefix
	value      string
	re         *regexp.Regexp
	headers    []headerMatcher
	queryParam []queryMatcher
}

type headerMatcher struct {
	name    string
	present *bool
	sm      *stringMatcher
	invert  bool
}

type queryMatcher struct {
	name    string
	present bool
	sm      *stringMatcher
}

type stringMatcher struct {
	kind       string
	value      string
	ignoreCase bool
	re         *regexp.Regexp
}

func compileMatch(m *routev3.RouteMatch, eng regexEngine) (routeMatch, error) {
	var rm routeMatch
	switch p := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		rm.kind, rm.value = "prefix", p.Prefix
	case *routev3.RouteMatch_Path:
		rm.kind, rm.value = "path", p.Path
	case *routev3.RouteMatch_PathSeparatedPrefix:
		rm.kind, rm.value = "path_separated_prefix", p.PathSeparatedPrefix
	case *routev3.RouteMatch_SafeRegex:
		re, err := eng.compile(p.SafeRegex.GetRegex(), true)
		if err != nil {
			return rm, err
		}
		rm.kind, rm.re = "safe_regex", re
	default:
		return rm, fmt.Errorf("path specifier %T not implemented", p)
	}
	for _, h := range m.GetHeaders() {
		hm := headerMatcher{name: strings.ToLower(h.GetName()), invert: h.GetInvertMatch()}
		switch s := h.GetHeaderMatchSpecifier().(type) {
		case *routev3.HeaderMatcher_StringMatch:
			sm, err := compileStringMatcher(s.StringMatch, eng)
			if err != nil {
				return rm, err
			}
			hm.sm = sm
		case *routev3.HeaderMatcher_PresentMatch:
			v := s.PresentMatch
			hm.present = &v
		case nil:
			// No specifier is a presence match
			// (HeaderUtility::createHeaderData,
			// HEADER_MATCH_SPECIFIER_NOT_SET: HeaderDataPresentMatch with
			// present true).
			v := true
			hm.present = &v
		default:
			return rm, fmt.Errorf("header matcher %T not implemented", s)
		}
		rm.headers = append(rm.headers, hm)
	}
	for _, q := range m.GetQueryParameters() {
		qm := queryMatcher{name: q.GetName()}
		switch s := q.GetQueryParameterMatchSpecifier().(type) {
		case *routev3.QueryParameterMatcher_StringMatch:
			sm, err := compileStringMatcher(s.StringMatch, eng)
			if err != nil {
				return rm, err
			}
			qm.sm = sm
		case *routev3.QueryParameterMatcher_PresentMatch:
			qm.present = s.PresentMatch
		default:
			return rm, fmt.Errorf("query parameter matcher %T not implemented", s)
		}
		rm.queryParam = append(rm.queryParam, qm)
	}
	return rm, nil
}

func compileStringMatcher(m *matcherv3.StringMatcher, eng regexEngine) (*stringMatcher, error) {
	sm := &stringMatcher{ignoreCase: m.GetIgnoreCase()}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		sm.kind, sm.value = "exact", p.Exact
	case *matcherv3.StringMatcher_Prefix:
		sm.kind, sm.value = "prefix", p.Prefix
	case *matcherv3.StringMatcher_Suffix:
		sm.kind, sm.value = "suffix", p.Suffix
	case *matcherv3.StringMatcher_Contains:
		sm.kind, sm.value = "contains", p.Contains
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := eng.compile(p.SafeRegex.GetRegex(), true)
		if err != nil {
			return nil, err
		}
		sm.kind, sm.re = "safe_regex", re
	default:
		return nil, fmt.Errorf("string matcher %T not implemented", p)
	}
	if sm.ignoreCase {
		sm.value = strings.ToLower(sm.value)
	}
	return sm, nil
}

func (sm *stringMatcher) matches(v string) bool {
	if sm.kind == "safe_regex" {
		return sm.re.MatchString(v) // ignore_case does not apply to regexes
	}
	if sm.ignoreCase {
		v = strings.ToLower(v)
	}
	switch sm.kind {
	case "exact":
		return v == sm.value
	case "prefix":
		return strings.HasPrefix(v, sm.value)
	case "suffix":
		return strings.HasSuffix(v, sm.value)
	default:
		return strings.Contains(v, sm.value)
	}
}

// matches applies the path matcher to the path without its query, then
// the header matchers (on the values requestHeader gives, each on its
// own), then the query parameter matchers (the first value of a
// parameter, raw: queryParams).
func (m *routeMatch) matches(req *extproc.Request) bool {
	path, query, _ := strings.Cut(req.Path, "?")
	if i := strings.IndexByte(path, '#'); i >= 0 {
		path = path[:i]
	}
	switch m.kind {
	case "prefix":
		if !strings.HasPrefix(path, m.value) {
			return false
		}
	case "path":
		if path != m.value {
			return false
		}
	case "path_separated_prefix":
		if path != m.value && !strings.HasPrefix(path, m.value+"/") {
			return false
		}
	case "safe_regex":
		if !m.re.MatchString(path) {
			return false
		}
	}
	for _, hm := range m.headers {
		if !hm.matches(requestHeader(req, hm.name)) {
			return false
		}
	}
	if len(m.queryParam) > 0 {
		q := queryParams(query)
		for _, qm := range m.queryParam {
			v, ok := q[qm.name]
			switch {
			case qm.sm == nil:
				if ok != qm.present {
					return false
				}
			case !ok || !qm.sm.matches(v):
				return false
			}
		}
	}
	return true
}

// queryParams is Http::Utility::QueryParamsMulti::parseQueryString as the
// route matcher uses it (RouteMatchContext::queryParams in
// source/common/router/config_impl.h; parseParameters with decode_params
// false, source/common/http/utility.cc): parameters split on '&' only, the
// name ending at the first '=' (without one the value is empty), names and
// values kept as the request wrote them, never percent-decoded, nor '+'
// turned into a space; only a name's first value is kept
// (QueryParameterMatcher::matches reads getFirstValue,
// source/common/router/config_utility.cc).
func queryParams(query string) map[string]string {
	q := map[string]string{}
	if query == "" {
		return q
	}
	for _, p := range strings.Split(query, "&") {
		name, value, _ := strings.Cut(p, "=")
		if _, seen := q[name]; !seen {
			q[name] = value
		}
	}
	return q
}

// requestHeader is the values of header name (lower case) in Envoy's
// request header map, which holds the pseudo-headers :authority, :path
// (with the query), :method and :scheme beside the others, so a header
// matcher reads them as it reads any header (HeaderUtility's HeaderData
// matchers look the name up in the request's HeaderMap,
// source/common/http/header_utility.h; the pseudo-headers are inline
// headers of RequestHeaderMapImpl, source/common/http/header_map_impl.h).
// No other ':'-prefixed name is in the map, and neither is "host": the
// Host header is :authority there (as in Go, whose server moves it to
// Request.Host).
func requestHeader(req *extproc.Request, name string) []string {
	var v string
	switch name {
	case ":authority":
		v = req.Authority
	case ":path":
		v = req.Path
	case ":method":
		v = req.Method
	case ":scheme":
		v = req.Scheme
	default:
		if strings.HasPrefix(name, ":") {
			return nil
		}
		return req.Headers.Values(name)
	}
	if v == "" {
		return nil
	}
	return []string{v}
}

// matches is HeaderUtility::matchHeaders for one matcher with
// envoy.reloadable_features.match_headers_individually on, its default
// (source/common/runtime/runtime_features.cc; the fix of CVE-2026-26308):
// a presence matcher asks whether the header is there
// (HeaderDataPresentMatch); a value matcher fails on a missing header,
// inverted or not, and otherwise tries each value on its own
// (HeaderDataBaseImpl::matchesHeadersIndividually,
// source/common/http/header_utility.h): it matches when some value
// matches, and, inverted, when none does. Values are never joined.
func (hm headerMatcher) matches(vals []string) bool {
	if hm.present != nil {
		return (len(vals) > 0) == *hm.present != hm.invert
	}
	if len(vals) == 0 {
		return false
	}
	for _, v := range vals {
		if hm.sm.matches(v) {
			return !hm.invert
		}
	}
	return hm.invert
}
