// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

func joinOf(stop chan struct{}, cs ...krt.StaticCollection[pod]) krt.Collection[pod] {
	members := make([]krt.Collection[pod], len(cs))
	for i, c := range cs {
		members[i] = c
	}
	return krt.JoinCollection(members, krt.WithStop(stop))
}

func TestJoinUnion(t *testing.T) {
	stop := newStop(t)
	first := krt.NewStaticCollection(nil, []pod{podC, podA}, krt.WithStop(stop))
	second := krt.NewStaticCollection(nil, []pod{podB}, krt.WithStop(stop))
	j := joinOf(stop, first, second)
	waitSynced(t, j)
	if diff := cmp.Diff([]pod{podA, podB, podC}, j.List()); diff != "" {
		t.Fatalf("List (-want +got):\n%s", diff)
	}
	r := record(t, j)
	d := pod{Name: "d", Namespace: "ns"}
	second.UpdateObject(d)
	r.expect(t, addEv(podA), addEv(podB), addEv(podC), addEv(d))
	first.DeleteObject("ns/c")
	r.expect(t, addEv(podA), addEv(podB), addEv(podC), addEv(d), delEv(podC))
}

func TestJoinFirstCollectionWins(t *testing.T) {
	stop := newStop(t)
	fromFirst := withIP(podA, "first")
	fromSecond := withIP(podA, "second")
	first := krt.NewStaticCollection(nil, []pod{fromFirst}, krt.WithStop(stop))
	second := krt.NewStaticCollection(nil, []pod{fromSecond}, krt.WithStop(stop))
	j := joinOf(stop, first, second)
	waitSynced(t, j)
	r := record(t, j)
	r.expect(t, addEv(fromFirst))

	// The join is level-based: a burst of changes may be coalesced, so each
	// step waits for its event before the next.
	second2 := withIP(podA, "second-2")
	want := []krt.Event[pod]{addEv(fromFirst)}
	step := func(change func(), ev krt.Event[pod]) {
		t.Helper()
		change()
		want = append(want, ev)
		r.expect(t, want...)
	}
	// The second member's change to a key the first holds is invisible; the
	// first then drops the key and the second's object takes over.
	second.UpdateObject(second2)
	step(func() { first.DeleteObject("ns/a") }, updEv(fromFirst, second2))
	// The first takes the key back.
	step(func() { first.UpdateObject(fromFirst) }, updEv(second2, fromFirst))
	// The second changes while hidden; the first drops the key again.
	second.UpdateObject(fromSecond)
	step(func() { first.DeleteObject("ns/a") }, updEv(fromFirst, fromSecond))
	step(func() { second.DeleteObject("ns/a") }, delEv(fromSecond))
}

func TestJoinTakeOverByEqualObjectEmitsNothing(t *testing.T) {
	stop := newStop(t)
	first := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop))
	second := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop))
	j := joinOf(stop, first, second)
	waitSynced(t, j)
	r := record(t, j)
	first.DeleteObject("ns/a") // the second's equal copy takes over
	first.UpdateObject(podB)   // sentinel
	r.expect(t, addEv(podA), addEv(podB))
	if got := j.GetKey("ns/a"); got == nil {
		t.Error("ns/a vanished from the join")
	}
}

func TestJoinSyncedWhenAllMembersSynced(t *testing.T) {
	stop := newStop(t)
	syncer := krt.NewManualSyncer()
	unsynced := krt.NewStaticCollection(syncer, []pod{podA}, krt.WithStop(stop))
	synced := krt.NewStaticCollection(nil, []pod{podB}, krt.WithStop(stop))
	j := joinOf(stop, synced, unsynced)
	eventually(t, "both members' objects", func() bool { return len(j.List()) == 2 })
	if j.HasSynced() {
		t.Fatal("join synced while a member is not")
	}
	syncer.MarkSynced()
	waitSynced(t, j)

	empty := krt.JoinCollection[pod](nil, krt.WithStop(stop))
	waitSynced(t, empty)
}

func TestJoinFetchTracksDependencies(t *testing.T) {
	stop := newStop(t)
	first := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop))
	second := krt.NewStaticCollection(nil, []pod{podB}, krt.WithStop(stop))
	j := joinOf(stop, first, second)
	qs := krt.NewStaticCollection(nil, []query{{Name: "ns/b"}}, krt.WithStop(stop))
	c := krt.NewCollection(qs, func(ctx krt.HandlerContext, q query) *view {
		var items []string
		for _, p := range krt.Fetch(ctx, j, krt.FilterKey(q.Name)) {
			items = append(items, showPod(p))
		}
		return &view{Name: q.Name, Items: items}
	}, krt.WithStop(stop))
	waitSynced(t, c)
	if got := itemsOf(c, "ns/b"); !slices.Equal(got, []string{"ns/b@10.0.0.2"}) {
		t.Fatalf("initial = %v", got)
	}
	before := krt.Stats(c).Transformations
	first.UpdateObject(withIP(podA, "9")) // another key: no rerun
	first.UpdateObject(withIP(podB, "1")) // the first member now shows ns/b
	eventually(t, "the first member's ns/b", func() bool {
		return slices.Equal(itemsOf(c, "ns/b"), []string{"ns/b@1"})
	})
	second.UpdateObject(withIP(podB, "2")) // hidden behind the first: join emits nothing
	first.DeleteObject("ns/b")
	eventually(t, "the second member's ns/b", func() bool {
		return slices.Equal(itemsOf(c, "ns/b"), []string{"ns/b@2"})
	})
	if got := krt.Stats(c).Transformations - before; got != 2 {
		t.Errorf("transformation runs = %d, want 2", got)
	}
}
