// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// matchTable compiles routes into one catch-all virtual host, each route a
// direct response named by its index's body, and returns a function that
// says which route body a request gets ("" for none).
func matchTable(t *testing.T, routes ...*routev3.Route) func(*extproc.Request) string {
	t.Helper()
	table, err := compileRouteTable(rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: routes}), defaultRegexEngine)
	if err != nil {
		t.Fatal(err)
	}
	return func(req *extproc.Request) string {
		if req.Headers == nil {
			req.Headers = http.Header{}
		}
		_, r := table.matchRoute(req)
		if r == nil {
			return ""
		}
		return string(r.direct.body)
	}
}

func exact(s string) *routev3.HeaderMatcher_StringMatch {
	return &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}}
}

func withHeaders(path string, body string, hs ...*routev3.HeaderMatcher) *routev3.Route {
	m := prefix(path)
	m.Headers = hs
	return &routev3.Route{Match: m, Action: direct(body)}
}

// A route's header matchers read the pseudo-headers as any other header:
// Envoy's request header map holds :authority, :path (with its query),
// :method and :scheme (inline headers of RequestHeaderMapImpl,
// source/common/http/header_map_impl.h), and HeaderUtility's HeaderData
// matchers look the name up in that map (source/common/http/
// header_utility.h). No other ':'-prefixed name is there, nor "host" (the
// Host header is :authority). A matcher without a specifier is a presence
// match (HeaderUtility::createHeaderData, HEADER_MATCH_SPECIFIER_NOT_SET),
// as Envoy's router_check corpus uses it (ClusterHeader.yaml, a bare
// ":authority" matcher; HeaderMatchedRouting.yaml).
func TestHeaderMatcherReadsPseudoHeaders(t *testing.T) {
	present := &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}
	match := matchTable(t,
		withHeaders("/authority", "authority", &routev3.HeaderMatcher{Name: ":authority", HeaderMatchSpecifier: exact("a.example.com")}),
		withHeaders("/path", "path", &routev3.HeaderMatcher{Name: ":path", HeaderMatchSpecifier: exact("/path?x=1")}),
		withHeaders("/scheme", "scheme", &routev3.HeaderMatcher{Name: ":scheme", HeaderMatchSpecifier: exact("https")}),
		withHeaders("/method", "method", &routev3.HeaderMatcher{Name: ":method", HeaderMatchSpecifier: exact("POST")}),
		withHeaders("/host", "host", &routev3.HeaderMatcher{Name: "host", HeaderMatchSpecifier: present}),
		withHeaders("/protocol", "protocol", &routev3.HeaderMatcher{Name: ":protocol", HeaderMatchSpecifier: present}),
		withHeaders("/bare", "bare", &routev3.HeaderMatcher{Name: ":authority"}),
		withHeaders("/present", "bare-header", &routev3.HeaderMatcher{Name: "x-present"}),
	)
	for _, c := range []struct {
		name string
		req  extproc.Request
		want string
	}{
		{"authority matches", extproc.Request{Method: "GET", Authority: "a.example.com", Path: "/authority", Scheme: "http"}, "authority"},
		{"authority differs", extproc.Request{Method: "GET", Authority: "b.example.com", Path: "/authority", Scheme: "http"}, ""},
		{"path with its query", extproc.Request{Method: "GET", Authority: "x", Path: "/path?x=1", Scheme: "http"}, "path"},
		{"path, other query", extproc.Request{Method: "GET", Authority: "x", Path: "/path?x=2", Scheme: "http"}, ""},
		{"scheme https", extproc.Request{Method: "GET", Authority: "x", Path: "/scheme", Scheme: "https"}, "scheme"},
		{"scheme http", extproc.Request{Method: "GET", Authority: "x", Path: "/scheme", Scheme: "http"}, ""},
		{"method", extproc.Request{Method: "POST", Authority: "x", Path: "/method", Scheme: "http"}, "method"},
		{"host is not a header", extproc.Request{Method: "GET", Authority: "x", Path: "/host", Scheme: "http"}, ""},
		{"no :protocol", extproc.Request{Method: "GET", Authority: "x", Path: "/protocol", Scheme: "http"}, ""},
		{"bare :authority", extproc.Request{Method: "GET", Authority: "x", Path: "/bare", Scheme: "http"}, "bare"},
		{"bare header present", extproc.Request{Method: "GET", Authority: "x", Path: "/present", Scheme: "http", Headers: http.Header{"X-Present": {""}}}, "bare-header"},
		{"bare header absent", extproc.Request{Method: "GET", Authority: "x", Path: "/present", Scheme: "http"}, ""},
	} {
		if got := match(&c.req); got != c.want {
			t.Errorf("%s: route %q, want %q", c.name, got, c.want)
		}
	}
}

// A header sent several times is matched value by value, never joined:
// HeaderUtility::matchHeaders with match_headers_individually, on by
// default since the fix of CVE-2026-26308 (source/common/runtime/
// runtime_features.cc; HeaderDataBaseImpl::matchesHeadersIndividually in
// source/common/http/header_utility.h). A value matcher matches when one
// value matches; inverted, when none does; a missing header fails it either
// way. A presence matcher looks at presence only.
func TestHeaderMatcherTriesEachValue(t *testing.T) {
	named := func(path string, m *routev3.HeaderMatcher) *routev3.Route {
		m.Name = "x-h"
		return withHeaders(path, path, m)
	}
	match := matchTable(t,
		named("/one", &routev3.HeaderMatcher{HeaderMatchSpecifier: exact("a")}),
		named("/joined", &routev3.HeaderMatcher{HeaderMatchSpecifier: exact("a,b")}),
		named("/not-a", &routev3.HeaderMatcher{HeaderMatchSpecifier: exact("a"), InvertMatch: true}),
		named("/not-c", &routev3.HeaderMatcher{HeaderMatchSpecifier: exact("c"), InvertMatch: true}),
		named("/absent", &routev3.HeaderMatcher{HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}, InvertMatch: true}),
	)
	twice := http.Header{"X-H": {"a", "b"}}
	for _, c := range []struct {
		path string
		h    http.Header
		want string
	}{
		{"/one", twice, "/one"},
		{"/joined", twice, ""},
		{"/joined", http.Header{"X-H": {"a,b"}}, "/joined"}, // one value with a comma
		{"/not-a", twice, ""},
		{"/not-c", twice, "/not-c"},
		{"/not-c", http.Header{}, ""},
		{"/absent", twice, ""},
		{"/absent", http.Header{}, "/absent"},
	} {
		if got := match(&extproc.Request{Method: "GET", Authority: "x", Path: c.path, Scheme: "http", Headers: c.h}); got != c.want {
			t.Errorf("%s with x-h %q: route %q, want %q", c.path, c.h.Values("x-h"), got, c.want)
		}
	}
}

// Query parameter values are matched as the request writes them: the route
// matcher parses the query with QueryParamsMulti::parseQueryString
// (source/common/http/utility.cc, decode_params false; called from
// RouteMatchContext::queryParams, source/common/router/config_impl.h), so
// "%20" stays "%20", '+' stays '+', ';' separates nothing, a parameter
// without '=' has the empty value, and only a name's first value counts
// (QueryParameterMatcher::matches, getFirstValue,
// source/common/router/config_utility.cc).
func TestQueryParameterValuesAreRaw(t *testing.T) {
	query := func(path, name string, sm *matcherv3.StringMatcher) *routev3.Route {
		m := prefix(path)
		m.QueryParameters = []*routev3.QueryParameterMatcher{{Name: name, QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: sm}}}
		return &routev3.Route{Match: m, Action: direct(path)}
	}
	eq := func(s string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
	}
	match := matchTable(t,
		query("/encoded", "m", eq("a%20b")),
		query("/decoded", "m", eq("a b")),
		query("/plus", "m", eq("a+b")),
		query("/name", "a%20b", eq("1")),
		query("/semicolon", "m", eq("1;n=2")),
		query("/empty", "m", eq("")),
	)
	for _, c := range []struct{ path, want string }{
		{"/encoded?m=a%20b", "/encoded"},
		{"/decoded?m=a%20b", ""},
		{"/decoded?m=a+b", ""},
		{"/plus?m=a+b", "/plus"},
		{"/name?a%20b=1", "/name"},
		{"/semicolon?m=1;n=2", "/semicolon"},
		{"/encoded?m=x&m=a%20b", ""}, // the first value only
		{"/empty?m", "/empty"},
	} {
		if got := match(&extproc.Request{Method: "GET", Authority: "x", Path: c.path, Scheme: "http"}); got != c.want {
			t.Errorf("%s: route %q, want %q", c.path, got, c.want)
		}
	}
}
