// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// podCount is a singleton value: how many pods carry app=x.
type podCount struct{ N int }

func countX(pods krt.Collection[pod]) krt.TransformationEmpty[podCount] {
	return func(ctx krt.HandlerContext) *podCount {
		ps := krt.Fetch(ctx, pods, krt.FilterLabel(labels("app", "x")))
		if len(ps) == 0 {
			return nil
		}
		return &podCount{N: len(ps)}
	}
}

func getN(s krt.Singleton[podCount]) int {
	if v := s.Get(); v != nil {
		return v.N
	}
	return -1
}

func TestSingletonRecomputes(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA, podB}, krt.WithStop(stop))
	s := krt.NewSingleton(countX(pods), krt.WithStop(stop))
	waitSynced(t, s.AsCollection())
	if got := getN(s); got != 1 {
		t.Fatalf("initial count = %d, want 1", got)
	}
	r := record(t, s)

	pods.UpdateObject(podC)
	eventually(t, "count 2", func() bool { return getN(s) == 2 })
	pods.DeleteObjects(func(pod) bool { return true })
	eventually(t, "no value", func() bool { return s.Get() == nil })
	pods.UpdateObject(podA)
	r.expect(t, addEv(podCount{1}), updEv(podCount{1}, podCount{2}), delEv(podCount{2}), addEv(podCount{1}))
}

func TestSingletonNilMeansNone(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podB}, krt.WithStop(stop))
	s := krt.NewSingleton(countX(pods), krt.WithStop(stop))
	waitSynced(t, s.AsCollection())
	if got := s.Get(); got != nil {
		t.Errorf("Get() = %+v, want nil", got)
	}
	if got := s.AsCollection().List(); len(got) != 0 {
		t.Errorf("AsCollection().List() = %+v, want empty", got)
	}
}

func TestSingletonAsCollection(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop))
	s := krt.NewSingleton(countX(pods), krt.WithStop(stop))
	c := s.AsCollection()
	waitSynced(t, c)
	if got := c.GetKey(krt.SingletonKey); got == nil || *got != (podCount{1}) {
		t.Errorf("GetKey(SingletonKey) = %v, want {1}", got)
	}
	if diff := cmp.Diff([]podCount{{1}}, c.List()); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	// Another collection can fetch the singleton through AsCollection.
	doubled := krt.NewSingleton(func(ctx krt.HandlerContext) *podCount {
		if v := krt.FetchOne(ctx, c, krt.FilterKey(krt.SingletonKey)); v != nil {
			return &podCount{N: 2 * v.N}
		}
		return nil
	}, krt.WithStop(stop))
	waitSynced(t, doubled.AsCollection())
	pods.UpdateObject(podC)
	eventually(t, "doubled count 4", func() bool { return getN(doubled) == 4 })
}

func TestSingletonSyncsWithWhatItFetches(t *testing.T) {
	stop := newStop(t)
	syncer := krt.NewManualSyncer()
	pods := krt.NewStaticCollection(syncer, []pod{podA}, krt.WithStop(stop))
	s := krt.NewSingleton(countX(pods), krt.WithStop(stop))
	eventually(t, "first value", func() bool { return getN(s) == 1 })
	if s.AsCollection().HasSynced() {
		t.Fatal("singleton synced before the collection it fetched")
	}
	syncer.MarkSynced()
	waitSynced(t, s.AsCollection())
}

func TestStaticSingleton(t *testing.T) {
	s := krt.NewStatic(&podCount{1}, true)
	if !s.AsCollection().HasSynced() {
		t.Error("NewStatic(startSynced=true) is not synced")
	}
	if got := getN(s); got != 1 {
		t.Fatalf("Get() = %d, want 1", got)
	}
	r := record(t, s)

	v := podCount{2}
	s.Set(&v)
	v.N = 99            // Set keeps its own copy
	s.Set(&podCount{2}) // equal: no event
	s.Set(nil)
	s.Set(nil) // already empty: no event
	s.Set(&podCount{3})
	r.expect(t, addEv(podCount{1}), updEv(podCount{1}, podCount{2}), delEv(podCount{2}), addEv(podCount{3}))
	if got := s.AsCollection().GetKey(krt.SingletonKey); got == nil || got.N != 3 {
		t.Errorf("GetKey(SingletonKey) = %v, want {3}", got)
	}
}

func TestStaticSingletonUnsynced(t *testing.T) {
	s := krt.NewStatic[podCount](nil, false)
	if s.Get() != nil {
		t.Errorf("Get() = %v, want nil", s.Get())
	}
	c := s.AsCollection()
	if c.HasSynced() {
		t.Fatal("NewStatic(startSynced=false) is synced")
	}
	s.Set(&podCount{1})
	if c.HasSynced() {
		t.Fatal("Set marked the singleton synced")
	}
	s.MarkSynced()
	if !c.HasSynced() {
		t.Fatal("not synced after MarkSynced")
	}
	s.MarkSynced() // idempotent
	waitSynced(t, c)
}
