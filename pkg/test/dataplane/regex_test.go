// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"encoding/json"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

const (
	// modelsRE's RE2 program is 259 instructions (RE2 2022-06-01): above
	// Envoy's default limit, far below the bootstrap's.
	modelsRE = `^/v1/models/[a-z0-9-]{1,64}$`
	// bigRE's is 36,000: above the bootstrap's 32,768.
	bigRE = `[^/]{1,1000}[^/]{1,1000}[^/]{1,1000}[^/]{1,1000}`
)

func safeRegex(re string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}}
}

// regexRoutes are route configurations carrying re in each place the data
// plane compiles a regex from.
func regexRoutes(t *testing.T, re string) map[string]*routev3.RouteConfiguration {
	t.Helper()
	cors, err := anypb.New(&corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{safeRegex(re)}})
	if err != nil {
		t.Fatal(err)
	}
	route := func(m *routev3.RouteMatch, a *routev3.RouteAction, pf map[string]*anypb.Any) *routev3.RouteConfiguration {
		if a == nil {
			a = &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}}
		}
		return rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Match: m, Action: &routev3.Route_Route{Route: a}, TypedPerFilterConfig: pf,
		}}})
	}
	return map[string]*routev3.RouteConfiguration{
		"path": route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}}, nil, nil),
		"header": route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{
			Name: "x-model", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: safeRegex(re)},
		}}}, nil, nil),
		"query": route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, QueryParameters: []*routev3.QueryParameterMatcher{{
			Name: "model", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: safeRegex(re)},
		}}}, nil, nil),
		"regex_rewrite": route(prefix("/"), &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"},
			RegexRewrite:     &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: re}, Substitution: "/"},
		}, nil),
		"cors allow_origin": route(prefix("/"), nil, map[string]*anypb.Any{filterCORS: cors}),
	}
}

func decodeRoute(dp *DataPlane, m proto.Message) error {
	a, err := anypb.New(m)
	if err != nil {
		return err
	}
	_, err = dp.decode(resourcev3.RouteType, a)
	return err
}

// Every regex of a route configuration is held to the RE2 program size
// limit of the bootstrap's runtime, with Envoy's message; a regex within
// it is served.
func TestRE2ProgramSizeLimit(t *testing.T) {
	dp := newTestDP(t, Options{}) // pkg/bootstrap's bootstrap: 32768
	for where, r := range regexRoutes(t, bigRE) {
		err := decodeRoute(dp, r)
		want := "regex '" + bigRE + "' RE2 program size of "
		if err == nil || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), " > max program size of 32768 set for the error level threshold. Increase configured max program size if necessary.") {
			t.Errorf("%s: a regex over the limit: err = %v", where, err)
		}
	}
	for where, r := range regexRoutes(t, modelsRE) {
		if err := decodeRoute(dp, r); err != nil {
			t.Errorf("%s: a regex within the limit: %v", where, err)
		}
	}

	load(t, dp, rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: modelsRE}}}, Action: direct("models"),
	}}}), seedListener(t))
	if resp := get(t, dp, 80, "GET", "any", "/v1/models/llama-3-8b", nil); resp.StatusCode != 200 || bodyOf(resp) != "models" {
		t.Errorf("/v1/models/llama-3-8b: %d %q", resp.StatusCode, bodyOf(resp))
	}
}

// Without a runtime that sets it, the limit is Envoy's default, 100.
func TestRE2ProgramSizeLimitDefault(t *testing.T) {
	dp := newTestDP(t, Options{})
	dp.target.regex = defaultRegexEngine
	err := decodeRoute(dp, regexRoutes(t, modelsRE)["path"])
	if err == nil || !strings.Contains(err.Error(), "> max program size of 100 set for the error level threshold") {
		t.Errorf("err = %v", err)
	}
}

// layered_runtime is read as Envoy's runtime loader reads it.
func TestRuntimeLayers(t *testing.T) {
	boot := func(t *testing.T, layers any) []byte {
		var m map[string]any
		if err := json.Unmarshal(testBootstrap(t, "127.0.0.1:1", false), &m); err != nil {
			t.Fatal(err)
		}
		if layers == nil {
			delete(m, "layered_runtime")
		} else {
			m["layered_runtime"] = map[string]any{"layers": layers}
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	static := func(name string, v map[string]any) map[string]any {
		return map[string]any{"name": name, "static_layer": v}
	}
	for _, c := range []struct {
		name   string
		layers any
		want   uint32
		err    string
	}{
		{"no layered_runtime", nil, 100, ""},
		{"string", []any{static("a", map[string]any{"re2.max_program_size.error_level": "500"})}, 500, ""},
		{"number, nested", []any{static("a", map[string]any{"re2": map[string]any{"max_program_size": map[string]any{"error_level": 700}}})}, 700, ""},
		{"later layer wins", []any{static("a", map[string]any{"re2.max_program_size.error_level": "500"}), static("b", map[string]any{"re2.max_program_size.error_level": 900})}, 900, ""},
		{"admin layer adds nothing", []any{static("a", map[string]any{"re2.max_program_size.error_level": "500"}), map[string]any{"name": "admin", "admin_layer": map[string]any{}}}, 500, ""},
		{"not an integer", []any{static("a", map[string]any{"re2.max_program_size.error_level": "true", "other.key": "x"})}, 100, ""},
		{"a list is invalid", []any{static("a", map[string]any{"k": []any{1}})}, 0, "Invalid runtime entry value for k"},
		{"duplicate layer", []any{static("a", map[string]any{}), static("a", map[string]any{})}, 0, "Duplicate layer name: a"},
		{"disk layer", []any{map[string]any{"name": "d", "disk_layer": map[string]any{"symlink_root": "/x"}}}, 0, "not implemented"},
		{"above 32 bits", []any{static("a", map[string]any{"re2.max_program_size.error_level": "4294967296"})}, 0, "not implemented"},
	} {
		t.Run(c.name, func(t *testing.T) {
			target, err := parseBootstrap(boot(t, c.layers))
			switch {
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("err = %v, want %q", err, c.err)
				}
			case err != nil:
				t.Fatal(err)
			case target.regex.maxProgramSize != c.want:
				t.Errorf("limit = %d, want %d", target.regex.maxProgramSize, c.want)
			}
		})
	}
}
