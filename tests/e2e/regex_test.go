// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"testing"

	"github.com/infermesh/infermesh/pkg/test/dataplane"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// The translator leaves out a rule with a regex match over the bootstrap's
// limit, so the route configuration it builds is accepted; a rule whose
// match is within the limit (above Envoy's default) stays.
func TestTranslatedRegexFitsTheBootstrapLimit(t *testing.T) {
	gw := seedGateway()
	route := *gw.Listeners[0].Routes[0]
	typ := gwv1.PathMatchRegularExpression
	small, big := modelsRE, bigRE
	withMatch := func(index int, re *string) model.Rule {
		r := route.Rules[0]
		http := *r.HTTP
		http.Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &typ, Value: re}}}
		r.HTTP, r.Index = &http, index
		return r
	}
	route.Rules = []model.Rule{withMatch(0, &small), withMatch(1, &big)}
	gw.Listeners[0].Routes[0] = &route
	res, err := core.BuildGateway(&gw, core.Inputs{}, core.Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	dp := newTestDP(t, dataplane.Options{})
	found := false
	for _, r := range res.Routes {
		if err := dp.Apply(r); err != nil {
			t.Errorf("the data plane refuses the translated routes: %v", err)
		}
		for _, vh := range r.GetVirtualHosts() {
			for _, route := range vh.GetRoutes() {
				found = found || route.GetMatch().GetSafeRegex().GetRegex() == small
			}
		}
	}
	if !found {
		t.Error("the match within the limit was left out")
	}
}

const (
	// modelsRE's RE2 program is 259 instructions (RE2 2022-06-01): above
	// Envoy's default limit, far below the bootstrap's.
	modelsRE = `^/v1/models/[a-z0-9-]{1,64}$`
	// bigRE's is 36,000: above the bootstrap's 32,768.
	bigRE = `[^/]{1,1000}[^/]{1,1000}[^/]{1,1000}[^/]{1,1000}`
)
