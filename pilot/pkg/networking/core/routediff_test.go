// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// diffState is a test route state: the route it was made for and the
// number of the change that made it (kept by keep).
type diffState struct {
	r   *model.Route
	gen int
}

// naiveDiff is what routeList.diff must do, written the plain way: it
// reports whether cur is strictly sorted (routeCmp) and, if so, the states
// for cur (the same state for the same pointer, keep's for an equal route,
// change's otherwise) and the calls, as keep/change/drop lines.
func naiveDiff(old []diffState, cur []*model.Route, gen *int) ([]diffState, []string, bool) {
	for j := 1; j < len(cur); j++ {
		if routeCmp(cur[j-1], cur[j]) >= 0 {
			return nil, nil, false
		}
	}
	var next []diffState
	var calls []string
	for _, r := range cur {
		k := slices.IndexFunc(old, func(o diffState) bool { return routeCmp(o.r, r) == 0 })
		switch {
		case k >= 0 && old[k].r == r:
			next = append(next, old[k])
		case k >= 0 && sameRoute(old[k].r, r):
			next = append(next, diffState{r: r, gen: old[k].gen})
			calls = append(calls, fmt.Sprintf("keep %s gen %d", r.Name, old[k].gen))
		case k >= 0:
			*gen++
			next = append(next, diffState{r: r, gen: *gen})
			calls = append(calls, fmt.Sprintf("change %s from gen %d", r.Name, old[k].gen))
		default:
			*gen++
			next = append(next, diffState{r: r, gen: *gen})
			calls = append(calls, "add "+r.Name)
		}
	}
	for _, o := range old {
		if !slices.ContainsFunc(cur, func(r *model.Route) bool { return routeCmp(o.r, r) == 0 }) {
			calls = append(calls, fmt.Sprintf("drop %s gen %d", o.r.Name, o.gen))
		}
	}
	return next, calls, true
}

// TestRouteListDiffAsNaive: over random sequences of route lists (routes
// kept as the same pointer, copied with equal values, changed, added,
// removed, and now and then a list out of order or with a route twice),
// routeList.diff answers as naiveDiff: false exactly for a list not
// strictly sorted, else the same states for the list and the same
// keep/change/add/drop calls (in any order).
func TestRouteListDiffAsNaive(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 17))
		names := 2 + rng.IntN(30)
		var l routeList[diffState]
		var ref []diffState
		gen, refGen := 0, 0
		var cur []*model.Route
		for step := range 40 {
			next := make([]*model.Route, 0, names)
			for i := range names {
				name := fmt.Sprintf("r%02d", i)
				var last *model.Route
				if k := slices.IndexFunc(cur, func(r *model.Route) bool { return r.Name == name }); k >= 0 {
					last = cur[k]
				}
				switch x := rng.IntN(20); {
				case last != nil && x < 14:
					next = append(next, last)
				case last != nil && x < 16:
					c := *last
					next = append(next, &c)
				case last == nil && x < 12:
				default:
					next = append(next, &model.Route{Kind: "HTTPRoute", Namespace: "ns", Name: name,
						Hostnames: []string{fmt.Sprintf("h%d", rng.IntN(3))}})
				}
			}
			if len(next) > 1 && rng.IntN(12) == 0 {
				i := rng.IntN(len(next) - 1)
				if rng.IntN(2) == 0 {
					next[i], next[i+1] = next[i+1], next[i]
				} else {
					next[i+1] = next[i]
				}
			}
			calls := []string{}
			ok := l.diff(next,
				func(o diffState, r *model.Route) diffState {
					calls = append(calls, fmt.Sprintf("keep %s gen %d", r.Name, o.gen))
					return diffState{r: r, gen: o.gen}
				},
				func(o *diffState, r *model.Route) diffState {
					gen++
					if o == nil {
						calls = append(calls, "add "+r.Name)
					} else {
						calls = append(calls, fmt.Sprintf("change %s from gen %d", r.Name, o.gen))
					}
					return diffState{r: r, gen: gen}
				},
				func(o diffState) { calls = append(calls, fmt.Sprintf("drop %s gen %d", o.r.Name, o.gen)) })
			want, wantCalls, wantOK := naiveDiff(ref, next, &refGen)
			if ok != wantOK {
				t.Fatalf("seed %d step %d: diff %t, want %t (strictly sorted)", seed, step, ok, wantOK)
			}
			if !ok {
				// The caller translates from scratch and starts over.
				l, ref, cur = routeList[diffState]{}, nil, nil
				gen, refGen = 0, 0
				continue
			}
			slices.Sort(calls)
			slices.Sort(wantCalls)
			if !slices.Equal(calls, wantCalls) {
				t.Fatalf("seed %d step %d: calls %q, want %q", seed, step, calls, wantCalls)
			}
			if !slices.Equal(l.states, want) || !slices.Equal(l.routes, next) {
				t.Fatalf("seed %d step %d: states %v routes %v, want %v %v", seed, step, l.states, l.routes, want, next)
			}
			ref, cur = want, next
		}
	}
}
