// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"maps"
	"net/http"
	"slices"
	"testing"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// The CORS filter as Envoy's CorsFilter (source/extensions/filters/http/
// cors/cors_filter.cc; CorsPolicy in the CORS filter's API reference):
// decodeHeaders takes a request with a non-empty Origin as a CORS request
// and latches an allowed origin (a matcher that matches "*" allows all); a
// preflight (OPTIONS with a non-empty Access-Control-Request-Method) from
// an allowed origin is answered with a headers-only 200 ("*" in
// allow_methods/allow_headers echoes the request's), and from another
// origin is forwarded unless forward_not_matching_preflights is false (it
// defaults to true), when it is answered without
// access-control-allow-origin; encodeHeaders adds allow-origin,
// allow-credentials and expose-headers to the response of a request from
// an allowed origin only.
func TestCORSFilterAsEnvoy(t *testing.T) {
	const ok, other = "https://ok.example", "https://other.example"
	exact := func(s string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
	}
	policy := func(forward *bool, origins ...string) *corsv3.CorsPolicy {
		p := &corsv3.CorsPolicy{AllowMethods: "*", AllowHeaders: "x-a", ExposeHeaders: "x-e", MaxAge: "60", AllowCredentials: wrapperspb.Bool(true)}
		for _, o := range origins {
			p.AllowOriginStringMatch = append(p.AllowOriginStringMatch, exact(o))
		}
		if forward != nil {
			p.ForwardNotMatchingPreflights = wrapperspb.Bool(*forward)
		}
		return p
	}
	no := false
	preflight := http.Header{"Access-Control-Request-Method": {"PUT"}, "Access-Control-Request-Headers": {"x-b"}}
	for _, tc := range []struct {
		name   string
		p      *corsv3.CorsPolicy
		method string
		origin string
		hdr    http.Header
		// reply is the preflight answer's headers, nil when the request
		// goes on; encoded what encodeHeaders adds to the upstream's answer.
		reply, encoded http.Header
	}{
		{"no Origin", policy(nil, ok), "GET", "", nil, nil, http.Header{}},
		{"allowed origin", policy(nil, ok), "GET", ok, nil, nil, http.Header{
			"Access-Control-Allow-Origin": {ok}, "Access-Control-Allow-Credentials": {"true"}, "Access-Control-Expose-Headers": {"x-e"}}},
		{"another origin", policy(nil, ok), "GET", other, nil, nil, http.Header{}},
		{"a matcher matching \"*\" allows all", policy(nil, "*"), "GET", other, nil, nil, http.Header{
			"Access-Control-Allow-Origin": {other}, "Access-Control-Allow-Credentials": {"true"}, "Access-Control-Expose-Headers": {"x-e"}}},
		{"preflight, allowed origin", policy(nil, ok), "OPTIONS", ok, preflight, http.Header{
			"Access-Control-Allow-Origin": {ok}, "Access-Control-Allow-Credentials": {"true"}, "Access-Control-Allow-Methods": {"PUT"},
			"Access-Control-Allow-Headers": {"x-a"}, "Access-Control-Max-Age": {"60"}}, nil},
		{"OPTIONS without Access-Control-Request-Method", policy(nil, ok), "OPTIONS", ok, nil, nil, http.Header{
			"Access-Control-Allow-Origin": {ok}, "Access-Control-Allow-Credentials": {"true"}, "Access-Control-Expose-Headers": {"x-e"}}},
		{"preflight, another origin, forwarded by default", policy(nil, ok), "OPTIONS", other, preflight, nil, http.Header{}},
		{"preflight, another origin, forward_not_matching_preflights false", policy(&no, ok), "OPTIONS", other, preflight, http.Header{
			"Access-Control-Allow-Credentials": {"true"}, "Access-Control-Allow-Methods": {"PUT"},
			"Access-Control-Allow-Headers": {"x-a"}, "Access-Control-Max-Age": {"60"}}, nil},
	} {
		req := &extproc.Request{Method: tc.method, Headers: tc.hdr.Clone()}
		if req.Headers == nil {
			req.Headers = http.Header{}
		}
		if tc.origin != "" {
			req.Headers.Set("Origin", tc.origin)
		}
		st, reply := corsDecode(tc.p, req)
		switch {
		case (reply == nil) != (tc.reply == nil):
			t.Errorf("%s: preflight answer %v, want %v", tc.name, reply, tc.reply)
			continue
		case reply != nil:
			if reply.Status != http.StatusOK || reply.Body != http.NoBody || !maps.EqualFunc(reply.Headers, tc.reply, slices.Equal[[]string]) {
				t.Errorf("%s: answered %d %v, want 200 %v without a body", tc.name, reply.Status, reply.Headers, tc.reply)
			}
			continue
		}
		h := http.Header{}
		st.encode(h)
		if !maps.EqualFunc(h, tc.encoded, slices.Equal[[]string]) {
			t.Errorf("%s: encode added %v, want %v", tc.name, h, tc.encoded)
		}
	}
}
