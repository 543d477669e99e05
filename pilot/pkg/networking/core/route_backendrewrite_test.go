// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// TestBackendURLRewrite: a backendRef's URLRewrite (HTTPRouteBackendURLRewrite)
// on the rule's single backend rewrites the path as the rule's would, and
// its hostname becomes the upstream Host; where Envoy cannot express it
// (a path rewrite on one of several weighted backends, or a rewrite on
// both the rule and its backendRef) the rule is refused with a problem
// naming why, never served with the rewrite left out.
func TestBackendURLRewrite(t *testing.T) {
	rewriteFilter := func(host string, path *gwv1.HTTPPathModifier) gwv1.HTTPRouteFilter {
		f := &gwv1.HTTPURLRewriteFilter{Path: path}
		if host != "" {
			f.Hostname = ptr.To(gwv1.PreciseHostname(host))
		}
		return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: f}
	}
	full := &gwv1.HTTPPathModifier{Type: gwv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To("/rewritten-full")}
	prefix := &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("/rewritten-prefix")}
	withBackendFilter := func(b []model.Backend, f gwv1.HTTPRouteFilter) []model.Backend {
		b[0].HTTPFilters = []gwv1.HTTPRouteFilter{f}
		return b
	}
	rule := func(path string, ruleFilters []gwv1.HTTPRouteFilter, backends []model.Backend) model.Rule {
		return model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch(path)}, Filters: ruleFilters}, Backends: backends}
	}
	r := httpRoute("ns", "rw", []string{"rw.example.com"},
		rule("/full", nil, withBackendFilter(backendTo("a"), rewriteFilter("", full))),
		rule("/prefix", nil, withBackendFilter(backendTo("a"), rewriteFilter("", prefix))),
		rule("/host", nil, withBackendFilter(backendTo("a"), rewriteFilter("up.example.com", nil))),
	)
	routes := routesOf(t, build(t, gateway(r), Inputs{}, Options{}), RouteConfigName(80, false), "rw.example.com:80")
	if len(routes) != 3 {
		t.Fatalf("%d routes, want 3", len(routes))
	}
	by := map[string]int{}
	for i, rt := range routes {
		by[rt.GetName()] = i
	}
	if got := routes[by["ns.rw.0"]].GetRoute().GetRegexRewrite().GetSubstitution(); got != "/rewritten-full" {
		t.Errorf("ReplaceFullPath on the backendRef: substitution %q, want /rewritten-full", got)
	}
	if ra := routes[by["ns.rw.1"]].GetRoute(); ra.GetPrefixRewrite() != "/rewritten-prefix" && ra.GetRegexRewrite() == nil {
		t.Errorf("ReplacePrefixMatch on the backendRef: no rewrite in %v", ra)
	}
	if got := routes[by["ns.rw.2"]].GetRoute().GetHostRewriteLiteral(); got != "up.example.com" {
		t.Errorf("hostname on the backendRef: host_rewrite_literal %q, want up.example.com", got)
	}

	two := append(withBackendFilter(backendTo("a"), rewriteFilter("", full)), backendTo("b")...)
	both := withBackendFilter(backendTo("a"), rewriteFilter("", full))
	refused := httpRoute("ns", "refused", []string{"rw.example.com"},
		rule("/two", nil, two),
		rule("/both", []gwv1.HTTPRouteFilter{rewriteFilter("", prefix)}, both),
	)
	problems := CheckRoute(refused, Options{})
	if len(problems) != 2 || problems[0].Rule != 0 || problems[1].Rule != 1 {
		t.Fatalf("problems %v, want one for each rule", problems)
	}
	if !strings.Contains(problems[0].Message, "weighted") || !strings.Contains(problems[1].Message, "both the rule and its backendRef") {
		t.Errorf("problems %v: want the weighted-backend and the double-rewrite reasons", problems)
	}
}
