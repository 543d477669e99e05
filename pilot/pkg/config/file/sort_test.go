// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSortObjects: sortObjects orders as sorting the objects themselves by
// collection, key, group and kind does, over shuffled objects.
func TestSortObjects(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 60 {
		objs := make([]object, n)
		for i := range objs {
			objs[i] = object{
				coll: []string{"", "Pods", "Services"}[r.IntN(3)],
				key:  fmt.Sprintf("ns/%d", r.IntN(20)),
				id:   objectID{group: []string{"", "g"}[r.IntN(2)], kind: []string{"A", "B"}[r.IntN(2)], name: fmt.Sprint(i)},
			}
		}
		want := slices.Clone(objs)
		slices.SortStableFunc(want, func(a, b object) int {
			return cmp.Or(strings.Compare(a.coll, b.coll), strings.Compare(a.key, b.key),
				strings.Compare(a.id.group, b.id.group), strings.Compare(a.id.kind, b.id.kind))
		})
		got := sortObjects(slices.Clone(objs))
		key := func(o object) string { return fmt.Sprint(o.coll, o.key, o.id.group, o.id.kind) }
		for i := range want {
			if key(got[i]) != key(want[i]) {
				t.Fatalf("%d objects: place %d holds %s, want %s", n, i, key(got[i]), key(want[i]))
			}
		}
		seen := map[string]bool{}
		for _, o := range got {
			seen[o.id.name] = true
		}
		if len(seen) != n {
			t.Fatalf("%d objects: %d distinct after sorting", n, len(seen))
		}
	}
}
