// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// bigRE2 is a regex whose RE2 program (36,000 instructions, measured with
// RE2 2022-06-01) exceeds the bootstrap's limit of 32,768: Envoy would
// refuse the whole route configuration holding it.
var bigRE2 = strings.Repeat(`[^/]{1,1000}`, 4)

// Every regex a route can carry is checked against what the Gateway's
// Envoy accepts, with an error naming the size and the limit.
func TestRegexMatchesEnvoyRefuses(t *testing.T) {
	val := func(s string) *string { return &s }
	path := func(re string) *gwv1.HTTPRouteMatch {
		typ := gwv1.PathMatchRegularExpression
		return &gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: &typ, Value: val(re)}}
	}
	header := func(re string) *gwv1.HTTPRouteMatch {
		typ := gwv1.HeaderMatchRegularExpression
		return &gwv1.HTTPRouteMatch{Headers: []gwv1.HTTPHeaderMatch{{Type: &typ, Name: "x-model", Value: re}}}
	}
	query := func(re string) *gwv1.HTTPRouteMatch {
		typ := gwv1.QueryParamMatchRegularExpression
		return &gwv1.HTTPRouteMatch{QueryParams: []gwv1.HTTPQueryParamMatch{{Type: &typ, Name: "model", Value: re}}}
	}
	grpc := func(re string) error {
		typ := gwv1.GRPCMethodMatchRegularExpression
		_, err := grpcMatch(&gwv1.GRPCRouteMatch{Method: &gwv1.GRPCMethodMatch{Type: &typ, Service: val("svc"), Method: val(re)}})
		return err
	}
	http := func(m *gwv1.HTTPRouteMatch) error { _, err := httpMatch(m); return err }
	tooLarge := map[string]error{
		"path": http(path(bigRE2)), "header": http(header(bigRE2)), "query": http(query(bigRE2)), "gRPC method": grpc(bigRE2),
	}
	for where, err := range tooLarge {
		if err == nil || !strings.Contains(err.Error(), "RE2 program has up to") || !strings.Contains(err.Error(), "more than the 32768 Envoy is configured to accept") {
			t.Errorf("%s regex over the RE2 limit: err = %v", where, err)
		}
	}
	for _, re := range []string{`\pL+`, `(?<model>.+)`, `(a{10}){101}`} {
		if err := http(path(re)); err == nil {
			t.Errorf("path regex %q: accepted; RE2 refuses it, or its program size cannot be bounded", re)
		}
	}
	for _, re := range []string{`^/v1/models/[a-z0-9-]{1,64}$`, `/v1/(?P<op>completions|chat/completions)`} {
		if err := http(path(re)); err != nil {
			t.Errorf("path regex %q: %v", re, err)
		}
		if err := grpc(re); err != nil {
			t.Errorf("gRPC method regex %q: %v", re, err)
		}
	}
}

// The remembered answers are checkRegexUncached's, for expressions Envoy
// takes and refuses, across rounds of the memo (a tiny one here, so that
// answers move to prev and fall out); the memo never holds more than two
// rounds.
func TestRegexMemoAnswersAsTheCheck(t *testing.T) {
	m := &regexMemo{max: 3}
	exprs := []string{`^/v1/.*$`, bigRE2, `(?<name>x)`, `[`, `\p{Greek}`, `^/a$`, `^/b$`, `^/c$`}
	for round := range 4 {
		for i, re := range exprs {
			if round%2 == 1 {
				re = exprs[len(exprs)-1-i]
			}
			got, want := m.check(re), checkRegexUncached(re)
			if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
				t.Fatalf("round %d %q: memo %v, check %v", round, re, got, want)
			}
			if n := len(m.cur) + len(m.prev); n > 2*m.max {
				t.Fatalf("memo holds %d answers, more than %d", n, 2*m.max)
			}
		}
	}
	if checkRegex(bigRE2) == nil || checkRegex(`^/ok$`) != nil {
		t.Error("checkRegex through the package memo answers wrongly")
	}
}
