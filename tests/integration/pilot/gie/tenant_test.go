// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/dataplane"
	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// One tenant's route on the shared seed Gateway holds a header value that
// Envoy refuses (CR/LF in a RequestHeaderModifier value: the CRD and the
// API server accept it).
//
// EPP: the lightweight EPP (GIE v1.6.2, plaintext). Request shape: GET
// /health with x-gie-pool selecting a route.
//
// Proves: the bad rule, and only it, is left out: the tenant's other rule
// is served, the route says PartiallyInvalid=True/UnsupportedValue naming
// the rule and field, and an Event on the route says the same; another
// tenant's route created afterwards is served within the usual time; no
// xDS response is NACKed; and a restarted pilot-discovery, which has no
// last good configuration, pushes the Gateway's valid routes again (the
// data plane accepts a new LDS, CDS, RDS and EDS) and every valid route
// still lands on its pick.
func TestTenantInvalidHeaderCostsOnlyItsRule(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP})
	h.waitPicking(get())
	dp := h.dataPlane()
	var nacks0 int64
	if dp != nil {
		nacks0 = dp.Counters().NACKs
	}

	bad := headerRoute("tenant-b", "b-good", poolRef(seed.PoolName, 0))
	badRule := *bad.Spec.Rules[0].DeepCopy()
	badRule.Matches[0].Headers = []gwv1.HTTPHeaderMatch{{Name: poolHeader, Value: "b-bad"}}
	badRule.Filters = []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestHeaderModifier,
		RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "X-Tenant", Value: "b\r\nx-admin: true"}}}}}
	bad.Spec.Rules = append(bad.Spec.Rules, badRule)
	h.createRoute(bad)

	routes := h.gateways.GatewayV1().HTTPRoutes(seed.Namespace)
	var partial *metav1.Condition
	describe := func() string { return fmt.Sprintf("%+v", partial) }
	poll.UntilOr(t, waitConfig, "tenant-b's PartiallyInvalid condition", func() bool {
		r, err := routes.Get(t.Context(), "tenant-b", metav1.GetOptions{})
		if err != nil || len(r.Status.Parents) != 1 {
			return false
		}
		partial = meta.FindStatusCondition(r.Status.Parents[0].Conditions, string(gwv1.RouteConditionPartiallyInvalid))
		acc := meta.FindStatusCondition(r.Status.Parents[0].Conditions, string(gwv1.RouteConditionAccepted))
		return partial != nil && partial.Status == metav1.ConditionTrue && partial.Reason == string(gwv1.RouteReasonUnsupportedValue) &&
			strings.HasPrefix(partial.Message, "Dropped Rule(s): rule 1: filters[0].requestHeaderModifier.set[0].value") &&
			acc != nil && acc.Status == metav1.ConditionTrue && partial.ObservedGeneration == r.Generation
	}, describe)

	events := h.kube.CoreV1().Events(seed.Namespace)
	var seen []string
	poll.UntilOr(t, waitConfig, "a Warning Event on tenant-b", func() bool {
		list, err := events.List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=tenant-b"})
		if err != nil {
			return false
		}
		seen = seen[:0]
		for _, e := range list.Items {
			seen = append(seen, e.Type+"/"+e.Reason+": "+e.Message)
			if e.Type == "Warning" && e.Reason == "UnsupportedValue" && e.InvolvedObject.Kind == "HTTPRoute" &&
				strings.Contains(e.Message, "rule 1: filters[0].requestHeaderModifier.set[0].value") {
				return true
			}
		}
		return false
	}, func() string { return strings.Join(seen, "\n") })

	h.createRoute(headerRoute("tenant-a", "a-new", poolRef(seed.PoolName, 0)))
	h.waitRouteConfig("tenant A's new route", routesTo(`"exact":"a-new"`))
	for _, v := range []string{"a-new", "b-good"} {
		h.landedOnPick(h.mustSend(onPool(get(), v)))
	}
	h.waitRouteConfig("no trace of the bad rule", func(js string) bool {
		return strings.Contains(js, `"exact":"b-good"`) && !strings.Contains(js, "b-bad") && !strings.Contains(js, "x-admin")
	})

	var acks int64
	if dp != nil {
		acks = dp.Counters().ACKs
	}
	h.pilot.Stop()
	if dp != nil {
		waitSnapshot(t, dp, "the data plane to see pilot-discovery gone", func(s dataplane.Snapshot) bool { return !s.Connected })
	}
	h.pilot.Restart()
	if dp != nil {
		waitSnapshot(t, dp, "the restarted pilot-discovery's pushes, accepted", func(s dataplane.Snapshot) bool {
			return s.Connected && s.Counters.ACKs >= acks+4
		})
	}
	for _, r := range []request{get(), onPool(get(), "a-new"), onPool(get(), "b-good")} {
		h.landedOnPick(h.mustSend(r))
	}
	if dp != nil {
		if c := dp.Counters(); c.NACKs != nacks0 {
			t.Fatalf("%d xDS responses NACKed, last %+v", c.NACKs-nacks0, dp.Snapshot().LastNACK)
		}
	}
}
