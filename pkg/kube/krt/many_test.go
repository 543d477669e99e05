// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// group lists the names it claims; each claim is an output keyed by name.
type group struct {
	Name   string
	Claims []string
	Tag    string
}

func (g group) ResourceName() string { return g.Name }

type claim struct{ Name, Group, Tag string }

func (c claim) ResourceName() string { return c.Name }

func claims(_ krt.HandlerContext, g group) []claim {
	out := make([]claim, 0, len(g.Claims))
	for _, n := range g.Claims {
		out = append(out, claim{Name: n, Group: g.Name, Tag: g.Tag})
	}
	return out
}

func newClaims(t *testing.T, initial ...group) (krt.StaticCollection[group], krt.Collection[claim]) {
	t.Helper()
	stop := newStop(t)
	groups := krt.NewStaticCollection(nil, initial, krt.WithStop(stop))
	c := krt.NewManyCollection(groups, claims, krt.WithStop(stop))
	waitSynced(t, c)
	return groups, c
}

func TestManyOutputsFollowTransformation(t *testing.T) {
	groups, c := newClaims(t, group{Name: "g", Claims: []string{"b", "a"}})
	if diff := cmp.Diff([]claim{{"a", "g", ""}, {"b", "g", ""}}, c.List()); diff != "" {
		t.Fatalf("initial (-want +got):\n%s", diff)
	}
	r := record(t, c)
	groups.UpdateObject(group{Name: "g", Claims: []string{"b", "c"}})
	r.expect(t, addEv(claim{"a", "g", ""}), addEv(claim{"b", "g", ""}),
		delEv(claim{"a", "g", ""}), addEv(claim{"c", "g", ""}))
	groups.UpdateObject(group{Name: "g", Claims: []string{"b", "c"}, Tag: "t"})
	groups.UpdateObject(group{Name: "h"}) // no outputs
	r.expect(t, addEv(claim{"a", "g", ""}), addEv(claim{"b", "g", ""}),
		delEv(claim{"a", "g", ""}), addEv(claim{"c", "g", ""}),
		updEv(claim{"b", "g", ""}, claim{"b", "g", "t"}), updEv(claim{"c", "g", ""}, claim{"c", "g", "t"}))
	groups.DeleteObject("g")
	eventually(t, "all outputs removed", func() bool { return len(c.List()) == 0 })
}

func TestManyConflictSmallerInputKeyWins(t *testing.T) {
	fromA := claim{Name: "shared", Group: "a"}
	fromB := claim{Name: "shared", Group: "b"}
	cases := map[string]func(t *testing.T) (krt.StaticCollection[group], krt.Collection[claim]){
		"both at start, larger first": func(t *testing.T) (krt.StaticCollection[group], krt.Collection[claim]) {
			return newClaims(t, group{Name: "b", Claims: []string{"shared"}}, group{Name: "a", Claims: []string{"shared"}})
		},
		"larger first, smaller added later": func(t *testing.T) (krt.StaticCollection[group], krt.Collection[claim]) {
			groups, c := newClaims(t, group{Name: "b", Claims: []string{"shared"}})
			groups.UpdateObject(group{Name: "a", Claims: []string{"shared"}})
			eventually(t, "a to take over", func() bool { g := c.GetKey("shared"); return g != nil && g.Group == "a" })
			return groups, c
		},
		"smaller first, larger added later": func(t *testing.T) (krt.StaticCollection[group], krt.Collection[claim]) {
			groups, c := newClaims(t, group{Name: "a", Claims: []string{"shared"}})
			groups.UpdateObject(group{Name: "b", Claims: []string{"shared", "own"}})
			eventually(t, "b's own output", func() bool { return c.GetKey("own") != nil })
			return groups, c
		},
		"smaller claims later by update": func(t *testing.T) (krt.StaticCollection[group], krt.Collection[claim]) {
			groups, c := newClaims(t, group{Name: "a"}, group{Name: "b", Claims: []string{"shared"}})
			groups.UpdateObject(group{Name: "a", Claims: []string{"shared"}})
			eventually(t, "a to take over", func() bool { g := c.GetKey("shared"); return g != nil && g.Group == "a" })
			return groups, c
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			groups, c := build(t)
			if got := c.GetKey("shared"); got == nil || *got != fromA {
				t.Fatalf("shared = %+v, want a's", got)
			}
			// b changes its version while it is not shown; then a stops
			// producing the key and b's latest version takes over.
			groups.UpdateObject(group{Name: "b", Claims: []string{"shared"}, Tag: "v2"})
			groups.UpdateObject(group{Name: "a", Claims: []string{"other"}})
			bV2 := fromB
			bV2.Tag = "v2"
			eventually(t, "b to take over", func() bool { g := c.GetKey("shared"); return g != nil && *g == bV2 })
			// a claims it back; then a is deleted and b takes over again.
			groups.UpdateObject(group{Name: "a", Claims: []string{"shared"}})
			eventually(t, "a to win again", func() bool { g := c.GetKey("shared"); return g != nil && *g == fromA })
			groups.DeleteObject("a")
			eventually(t, "b after a's deletion", func() bool { g := c.GetKey("shared"); return g != nil && *g == bV2 })
			groups.DeleteObject("b")
			eventually(t, "no owner left", func() bool { return c.GetKey("shared") == nil })
		})
	}
}

func TestManyConflictTakeOverEvents(t *testing.T) {
	// A take-over by an equal object emits nothing; by a different one, an
	// update.
	groups, c := newClaims(t,
		group{Name: "a", Claims: []string{"k"}, Tag: "same"},
		group{Name: "b", Claims: []string{"k"}, Tag: "same"})
	r := record(t, c)
	groups.UpdateObject(group{Name: "a"})
	eventually(t, "b to own k", func() bool { g := c.GetKey("k"); return g != nil && g.Group == "b" })
	groups.UpdateObject(group{Name: "a", Claims: []string{"k"}, Tag: "new"})
	r.expect(t,
		addEv(claim{"k", "a", "same"}),
		updEv(claim{"k", "a", "same"}, claim{"k", "b", "same"}),
		updEv(claim{"k", "b", "same"}, claim{"k", "a", "new"}))
}
