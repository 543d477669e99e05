// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

func corsRule(method *gwv1.HTTPMethod, backends ...model.Backend) model.Rule {
	m := prefixMatch("/v1")
	m.Method = method
	return model.Rule{
		HTTP: &gwv1.HTTPRouteRule{
			Matches: []gwv1.HTTPRouteMatch{m},
			Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterCORS, CORS: &gwv1.HTTPCORSFilter{
				AllowOrigins: []gwv1.CORSOrigin{"https://app.example.com"}, AllowMethods: []gwv1.HTTPMethodWithWildcard{"POST"},
			}}},
		},
		Backends: backends,
	}
}

// A rule with a CORS filter and a pool backend gets, just before its
// route, one that only CORS preflights match, whose CORS policy answers
// every preflight itself and whose ext_proc is disabled, also on the
// weighted clusters; otherwise it is the rule's route.
func TestCORSPreflightRoutePrecedesAPoolRule(t *testing.T) {
	single := corsRule(nil, model.Backend{Weight: 1, Pool: pool("llm", "a", inferencev1.EndpointPickerFailClose)})
	weighted := corsRule(nil, model.Backend{Weight: 1, Pool: pool("llm", "a", inferencev1.EndpointPickerFailClose)},
		model.Backend{Weight: 1, Service: svc("llm", "b", 8000)})
	for name, rule := range map[string]model.Rule{"single pool": single, "weighted": weighted} {
		t.Run(name, func(t *testing.T) {
			res := build(t, gateway(httpRoute("llm", "chat", []string{"llm.example.com"}, rule)), Inputs{}, inferenceOn)
			rs := routesOf(t, res, "http.80", "llm.example.com:80")
			if len(rs) != 2 {
				t.Fatalf("%d routes, want the preflight route and the rule's", len(rs))
			}
			pre, main := rs[0], rs[1]
			want := proto2Names(main.GetMatch().GetHeaders())
			want = append(want, ":method=OPTIONS", "origin~.+", "access-control-request-method~.+")
			if got := proto2Names(pre.GetMatch().GetHeaders()); !cmp.Equal(got, want) {
				t.Errorf("preflight route headers %v, want %v", got, want)
			}
			if !cmp.Equal(pre.GetMatch().GetPathSeparatedPrefix(), main.GetMatch().GetPathSeparatedPrefix()) {
				t.Errorf("preflight path %v, rule path %v", pre.GetMatch(), main.GetMatch())
			}
			p := &corsv3.CorsPolicy{}
			if err := pre.TypedPerFilterConfig[FilterCORS].UnmarshalTo(p); err != nil {
				t.Fatal(err)
			}
			if p.GetForwardNotMatchingPreflights() == nil || p.GetForwardNotMatchingPreflights().GetValue() || p.GetAllowMethods() != "POST" {
				t.Errorf("preflight CORS policy %v, want the rule's with forward_not_matching_preflights false", p)
			}
			if !extProcOf(t, pre.TypedPerFilterConfig).GetDisabled() {
				t.Error("preflight route: ext_proc not disabled")
			}
			for _, cw := range pre.GetRoute().GetWeightedClusters().GetClusters() {
				if cw.GetTypedPerFilterConfig()[FilterExtProc] != nil {
					t.Errorf("weighted cluster %s keeps an ext_proc override, which would enable the EPP again", cw.GetName())
				}
			}
			if !hasExtProc(main) {
				t.Error("the rule's own route lost its EPP")
			}
			mainRA := main.GetRoute()
			if d := cmp.Diff(stripExtProc(mainRA), pre.GetRoute(), protocmp.Transform()); d != "" {
				t.Errorf("preflight action differs from the rule's (-rule +preflight):\n%s", d)
			}
		})
	}
}

// No preflight route where none is needed: a rule that matches another
// method (no preflight reaches it), a CORS rule to a Service, and a pool
// rule without CORS.
func TestNoCORSPreflightRouteWithoutNeed(t *testing.T) {
	pl := model.Backend{Weight: 1, Pool: pool("llm", "a", inferencev1.EndpointPickerFailOpen)}
	noCORS := corsRule(nil, pl)
	noCORS.HTTP.Filters = nil
	for name, rule := range map[string]model.Rule{
		"POST only":  corsRule(ptr.To(gwv1.HTTPMethodPost), pl),
		"to Service": corsRule(nil, model.Backend{Weight: 1, Service: svc("llm", "b", 8000)}),
		"no CORS":    noCORS,
	} {
		t.Run(name, func(t *testing.T) {
			res := build(t, gateway(httpRoute("llm", "chat", []string{"llm.example.com"}, rule)), Inputs{}, inferenceOn)
			if rs := routesOf(t, res, "http.80", "llm.example.com:80"); len(rs) != 1 {
				t.Errorf("%d routes, want only the rule's", len(rs))
			}
		})
	}
	// A rule matching OPTIONS gets one, without a second :method matcher.
	res := build(t, gateway(httpRoute("llm", "chat", []string{"llm.example.com"}, corsRule(ptr.To(gwv1.HTTPMethodOptions), pl))), Inputs{}, inferenceOn)
	rs := routesOf(t, res, "http.80", "llm.example.com:80")
	if len(rs) != 2 {
		t.Fatalf("%d routes, want 2", len(rs))
	}
	if got, want := proto2Names(rs[0].GetMatch().GetHeaders()), []string{":method=OPTIONS", "origin~.+", "access-control-request-method~.+"}; !cmp.Equal(got, want) {
		t.Errorf("headers %v, want %v", got, want)
	}
}

// proto2Names renders header matchers as name=exact or name~regex.
func proto2Names(hs []*routev3.HeaderMatcher) []string {
	out := []string{}
	for _, h := range hs {
		sm := h.GetStringMatch()
		if re := sm.GetSafeRegex().GetRegex(); re != "" {
			out = append(out, h.GetName()+"~"+re)
		} else {
			out = append(out, h.GetName()+"="+sm.GetExact())
		}
	}
	return out
}

// stripExtProc is a copy of ra without weighted clusters' ext_proc
// overrides.
func stripExtProc(ra *routev3.RouteAction) *routev3.RouteAction {
	out := proto.Clone(ra).(*routev3.RouteAction)
	for _, cw := range out.GetWeightedClusters().GetClusters() {
		delete(cw.TypedPerFilterConfig, FilterExtProc)
		if len(cw.TypedPerFilterConfig) == 0 {
			cw.TypedPerFilterConfig = nil
		}
	}
	return out
}
