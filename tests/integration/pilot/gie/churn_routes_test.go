// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// Routes and pools added and changed under live traffic.
//
// EPP: the lightweight EPP (GIE v1.6.2, plaintext); every pool here selects
// the seed's three pods and names the seed's EPP Service, which picks among
// them. Request shape: GET /health (bodiless, the cheapest request),
// from four clients back to back: two on the seed's route, two on a
// "stable" route (x-gie-pool: stable) to the pool "stable". Both routes
// exist before and after every change.
//
// 100 changes, each one API write (a new route with its pool counts as
// one), in a cycle of five:
//  0. add a pool churn-<i> and a route to it (x-gie-pool: churn-<i>);
//  1. change the seed's route: timeouts.request 30s / 45s alternately;
//  2. change a live pool: the failure mode of the stable pool or the
//     seed's pool, FailOpen / FailClose alternately (the EPP is up, so
//     neither mode changes an outcome; change 97 toggles the newest churn
//     pool instead);
//  3. change the newest churn route: point it at the stable pool;
//  4. delete the oldest churn route and its pool.
//
// After each change the test waits (bounded) for two more completed
// requests, so traffic overlaps every configuration push.
//
// Proves: zero failed requests (5xx or transport errors) on the two
// routes that exist throughout, every one landing on its recorded pick;
// no configuration NACKed; the changes did reach the data plane (the last
// churn route and the final failure modes are in effect, and a request on
// the last churn route lands on its pick).
func TestRoutesAndPoolsChurn(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP})
	const stable = "stable"
	h.createPool(newPool(stable, seed.PoolName, seed.EPPName, inferencev1.EndpointPickerFailOpen))
	h.createRoute(headerRoute(stable, stable, poolRef(stable, 0)))
	h.waitEndpoints(shadowClusterOf(stable), []string{ep(pod13), ep(pod14), ep(pod15)})
	h.waitRouteConfig("the stable route", routesTo(`"exact":"stable"`, shadowClusterOf(stable)))
	h.waitPicking(get())
	h.waitPicking(onPool(get(), stable))
	dp := h.dataPlane()
	var nacks0, acks0 int64
	if dp != nil {
		c := dp.Counters()
		nacks0, acks0 = c.NACKs, c.ACKs
	}

	tr := h.startTraffic(map[string]request{
		"seed-1": get(), "seed-2": get(),
		"stable-1": onPool(get(), stable), "stable-2": onPool(get(), stable),
	})
	tr.waitCount(t, 0, 20, "before the changes")

	ctx := t.Context()
	routes := h.gateways.GatewayV1().HTTPRoutes(seed.Namespace)
	pools := h.inference.InferenceV1().InferencePools(seed.Namespace)
	update := func(name string, mutate func(*gwv1.HTTPRoute)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			r, err := routes.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			mutate(r)
			_, err = routes.Update(ctx, r, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatalf("update route %s: %v", name, err)
		}
	}
	modes := map[string]inferencev1.EndpointPickerFailureMode{stable: inferencev1.EndpointPickerFailOpen, seed.PoolName: inferencev1.EndpointPickerFailOpen}
	var live []string // churn routes (and pools) in creation order
	last := ""
	for i := range 100 {
		switch i % 5 {
		case 0:
			name := fmt.Sprintf("churn-%d", i)
			h.createPool(newPool(name, seed.PoolName, seed.EPPName, inferencev1.EndpointPickerFailOpen))
			h.createRoute(headerRoute(name, name, poolRef(name, 0)))
			live, last = append(live, name), name
			modes[name] = inferencev1.EndpointPickerFailOpen
		case 1:
			update(seed.RouteName, func(r *gwv1.HTTPRoute) {
				d := gwv1.Duration("30s")
				if i%10 == 6 {
					d = "45s"
				}
				r.Spec.Rules[0].Timeouts = &gwv1.HTTPRouteTimeouts{Request: ptr.To(d)}
			})
		case 2:
			// The seed's pool is toggled 9 times (change 97 toggles the
			// newest churn pool instead), the stable one 10: they end in
			// different modes, which the final check tells apart.
			name := stable
			if i%10 == 7 {
				name = seed.PoolName
			}
			if i == 97 {
				name = last
			}
			if modes[name] == inferencev1.EndpointPickerFailOpen {
				modes[name] = inferencev1.EndpointPickerFailClose
			} else {
				modes[name] = inferencev1.EndpointPickerFailOpen
			}
			if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				p, err := pools.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				p.Spec.EndpointPickerRef.FailureMode = modes[name]
				_, err = pools.Update(ctx, p, metav1.UpdateOptions{})
				return err
			}); err != nil {
				t.Fatalf("update pool %s: %v", name, err)
			}
		case 3:
			update(live[len(live)-1], func(r *gwv1.HTTPRoute) {
				r.Spec.Rules[0].BackendRefs = []gwv1.HTTPBackendRef{poolRef(stable, 0)}
			})
		case 4:
			if len(live) > 2 {
				old := live[0]
				live = live[1:]
				if err := routes.Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := pools.Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		tr.waitCount(t, tr.count(), 2, fmt.Sprintf("after change %d", i))
	}

	tr.waitCount(t, tr.count(), 20, "after the changes")
	tr.stop()

	t.Log(tr.summary())
	if f := tr.failures(); len(f) != 0 {
		t.Fatalf("%d requests failed on routes that existed throughout, first %v", len(f), f[0])
	}
	h.checkLandedOnPicks(tr)

	// The last changes reached the data plane: the newest churn route (last
	// changed to the stable pool at change 98) and the final failure modes.
	allow := func(m inferencev1.EndpointPickerFailureMode) string {
		return fmt.Sprintf(`"failureModeAllow":%v`, m == inferencev1.EndpointPickerFailOpen)
	}
	h.waitRouteConfig("the last churn route, to the stable pool", routesTo(fmt.Sprintf(`"exact":"%s"`, last), shadowClusterOf(stable)))
	t.Logf("final failure modes: stable %s, seed %s", modes[stable], modes[seed.PoolName])
	h.waitRouteConfig("the final failure modes", func(js string) bool {
		return containsAll(js, allow(modes[stable]), allow(modes[seed.PoolName]))
	})
	h.landedOnPick(h.mustSend(onPool(get(), last)))
	if dp != nil {
		c := dp.Counters()
		t.Logf("data plane: %d xDS responses accepted during the changes", c.ACKs-acks0)
		if c.NACKs != nacks0 {
			t.Fatalf("%d xDS responses NACKed during the changes, last %+v", c.NACKs-nacks0, dp.Snapshot().LastNACK)
		}
	}
}
