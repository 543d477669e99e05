// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/seed"
)

// PoolGatewayParents folds every route that references the pool, on every
// Gateway each names, whatever their order: a refused route sorting first
// must not hide the accepted routes after it, and two routes on two
// Gateways give the pool two parents.
func TestPoolGatewayParentsFoldsEveryRoute(t *testing.T) {
	pool := types.NamespacedName{Namespace: "ns", Name: "pool"}
	other := types.NamespacedName{Namespace: "ns", Name: "other-pool"}
	g1 := types.NamespacedName{Namespace: "gw", Name: "one"}
	g2 := types.NamespacedName{Namespace: "gw", Name: "two"}
	route := func(name string, pools []types.NamespacedName, parents ...ParentResult) RouteResult {
		return RouteResult{Route: Route{Kind: HTTPRouteKind, Namespace: "ns", Name: name}, Parents: parents, Pools: pools}
	}
	on := func(g types.NamespacedName, accepted bool) ParentResult {
		p := ParentResult{Gateway: g, Accepted: accepted, Reason: gwv1.RouteReasonAccepted}
		if !accepted {
			p.Reason, p.Message = gwv1.RouteReasonNoMatchingParent, "no listener named nope"
		}
		return p
	}
	att := func(name string, p ParentResult) RouteAttachment {
		return p.RouteAttachment(Route{Kind: HTTPRouteKind, Namespace: "ns", Name: name})
	}
	cases := []struct {
		name   string
		routes []RouteResult
		want   []PoolParent
	}{{
		name: "two routes on two Gateways",
		routes: []RouteResult{
			route("a", []types.NamespacedName{pool}, on(g2, true)),
			route("b", []types.NamespacedName{pool}, on(g1, true)),
		},
		want: []PoolParent{
			{Gateway: g1, Routes: []RouteAttachment{att("b", on(g1, true))}},
			{Gateway: g2, Routes: []RouteAttachment{att("a", on(g2, true))}},
		},
	}, {
		name: "a refused route sorting first keeps the accepted one after it",
		routes: []RouteResult{
			route("a-refused", []types.NamespacedName{pool}, on(g1, false)),
			route("b-accepted", []types.NamespacedName{pool}, on(g1, true), on(g2, true)),
		},
		want: []PoolParent{
			{Gateway: g1, Routes: []RouteAttachment{att("a-refused", on(g1, false)), att("b-accepted", on(g1, true))}},
			{Gateway: g2, Routes: []RouteAttachment{att("b-accepted", on(g2, true))}},
		},
	}, {
		name: "a route to another pool is not folded",
		routes: []RouteResult{
			route("a", []types.NamespacedName{other}, on(g1, true)),
			route("b", []types.NamespacedName{other, pool}, on(g2, true)),
		},
		want: []PoolParent{{Gateway: g2, Routes: []RouteAttachment{att("b", on(g2, true))}}},
	}, {
		name:   "no route references the pool",
		routes: []RouteResult{route("a", []types.NamespacedName{other}, on(g1, true))},
		want:   []PoolParent{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PoolGatewayParents(pool, tc.routes)); diff != "" {
				t.Errorf("PoolGatewayParents (-want +got):\n%s", diff)
			}
		})
	}
}

// Through the pipeline: a route the Gateway refuses ("a-refused", sorting
// before the seed's "llm-route") and the seed route on two Gateways, all to
// the seed pool. The pool has both Gateways as parents, each Accepted=True
// (an accepted route on each), and keeps its shadow Service: folding only
// the first route would leave it one refused parent and no shadow Service.
func TestPoolParentsFromEveryRouteAndGateway(t *testing.T) {
	gw2 := seed.Gateway()
	gw2.Name = "gateway-2"
	route := seed.HTTPRoute()
	route.Spec.ParentRefs = append(route.Spec.ParentRefs, route.Spec.ParentRefs[0])
	route.Spec.ParentRefs[1].Name = "gateway-2"
	refused := seed.HTTPRoute()
	refused.Name = "a-refused"
	refused.Spec.ParentRefs[0].SectionName = ptr.To(gwv1.SectionName("nope"))
	p := newPipeline(t, true, append(seedObjects(), gw2, route, refused)...)
	describe := func() string { return fmt.Sprint(p.poolStatus(seed.Namespace, seed.PoolName)) }
	p.eventually("two parents", func() bool { return len(p.poolStatus(seed.Namespace, seed.PoolName)) == 2 }, describe)
	for _, st := range p.poolStatus(seed.Namespace, seed.PoolName) {
		if c := meta.FindStatusCondition(st.Conditions, "Accepted"); c == nil || c.Status != "True" {
			t.Errorf("parent %s: Accepted = %+v, want True (an accepted route attaches the pool to it)", st.ParentRef.Name, c)
		}
	}
	marker(p)
	if s := p.out.ShadowServices.GetKey(seed.Namespace + "/" + ShadowServiceName(seed.PoolName)); s == nil {
		t.Errorf("no shadow Service for a pool two Gateways accept (%s)", describe())
	}
}
