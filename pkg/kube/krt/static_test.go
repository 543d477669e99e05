// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

var (
	podA = pod{Name: "a", Namespace: "ns", Labels: labels("app", "x"), IP: "10.0.0.1"}
	podB = pod{Name: "b", Namespace: "ns", Labels: labels("app", "y"), IP: "10.0.0.2"}
	podC = pod{Name: "c", Namespace: "ns", Labels: labels("app", "x"), IP: "10.0.0.3"}
)

func withIP(p pod, ip string) pod { p.IP = ip; return p }

func TestStaticUpdateObjectAlwaysEmits(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podA})
	r := record(t, c)
	r.expect(t, addEv(podA))

	c.UpdateObject(podA) // equal to the stored object: still an event
	c.UpdateObject(withIP(podA, "10.0.0.9"))
	c.UpdateObject(podB)
	r.expect(t, addEv(podA), updEv(podA, podA), updEv(podA, withIP(podA, "10.0.0.9")), addEv(podB))
	if diff := cmp.Diff([]pod{withIP(podA, "10.0.0.9"), podB}, c.List()); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func TestStaticConditionalUpdateObjectSuppressesEqual(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podA})
	r := record(t, c)
	// A fresh copy with equal contents (a new labels map) is still equal.
	c.ConditionalUpdateObject(pod{Name: "a", Namespace: "ns", Labels: labels("app", "x"), IP: "10.0.0.1"})
	c.ConditionalUpdateObject(withIP(podA, "10.0.0.9"))
	c.ConditionalUpdateObject(podB)
	r.expect(t, addEv(podA), updEv(podA, withIP(podA, "10.0.0.9")), addEv(podB))
}

func TestStaticDeleteObject(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podA, podB})
	r := record(t, c)
	c.DeleteObject("ns/missing") // nothing to delete: no event
	c.DeleteObject("ns/a")
	c.UpdateObject(podC) // sentinel: anything wrongly emitted would come before it
	r.expect(t, addEv(podA), addEv(podB), delEv(podA), addEv(podC))
	if got := c.GetKey("ns/a"); got != nil {
		t.Errorf("GetKey(ns/a) after delete = %+v, want nil", got)
	}
}

func TestStaticDeleteObjects(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podC, podB, podA})
	r := record(t, c)
	c.DeleteObjects(func(p pod) bool { return p.Labels["app"] == "x" })
	c.DeleteObjects(func(pod) bool { return false })
	c.UpdateObject(podA)
	r.expect(t, addEv(podA), addEv(podB), addEv(podC), delEv(podA), delEv(podC), addEv(podA))
	if diff := cmp.Diff([]string{"ns/a", "ns/b"}, keysOf(c.List())); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

func TestStaticReset(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podA, podB})
	r := record(t, c)
	r.expect(t, addEv(podA), addEv(podB))

	a2 := withIP(podA, "10.0.0.7")
	// podB unchanged: no event. podA: updated. podC: added. The first ns/c is
	// overridden by the later element with the same key.
	c.Reset([]pod{withIP(podC, "stale"), podB, a2, podC})
	got := r.wait(t, 4)
	checkEventShapes(t, got)
	// Reset does not promise an order within its batch.
	want := []krt.Event[pod]{addEv(podA), addEv(podB), updEv(podA, a2), addEv(podC)}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(eventLess[pod])); diff != "" {
		t.Fatalf("events after Reset (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]pod{a2, podB, podC}, c.List()); diff != "" {
		t.Errorf("List after Reset (-want +got):\n%s", diff)
	}

	// Deleting everything but one; an identical Reset emits nothing.
	c.Reset([]pod{podB})
	c.Reset([]pod{podB})
	c.UpdateObject(podA) // sentinel
	got = r.wait(t, 7)
	checkEventShapes(t, got)
	want = append(want, delEv(a2), delEv(podC), addEv(podA))
	if diff := cmp.Diff(want[4:], got[4:], cmpopts.SortSlices(eventLess[pod])); diff != "" || len(got) != 7 {
		t.Fatalf("events after the second Reset (-want +got):\n%s (got %d events, want 7)", diff, len(got))
	}
}

// ConditionalApply hands its deletes and updates over as one batch: a
// batch handler gets them in one call, deletes first, with nothing for an
// update equal to the stored object or a delete of a missing key, and the
// last of two updates of one key.
func TestStaticConditionalApplyIsOneBatch(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podA, podB})
	var b batches
	reg := c.RegisterBatch(b.add, false)
	defer reg.UnregisterHandler()
	waitSynced(t, reg)
	a2 := withIP(podA, "10.0.0.7")
	c.ConditionalApply([]string{"ns/b", "ns/missing"}, []pod{withIP(podC, "stale"), podA, a2, podC})
	eventually(t, "one batch", func() bool { return len(b.flat()) >= 3 })
	b.mu.Lock()
	got := b.got
	b.mu.Unlock()
	want := [][]krt.Event[pod]{{delEv(podB), addEv(withIP(podC, "stale")), updEv(podA, a2), updEv(withIP(podC, "stale"), podC)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]pod{a2, podC}, c.List()); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

// eventLess orders events by type, then by key, for order-free comparison.
func eventLess[T any](a, b krt.Event[T]) bool {
	if a.Event != b.Event {
		return a.Event < b.Event
	}
	return krt.GetKey(a.Latest()) < krt.GetKey(b.Latest())
}

func TestStaticNewWithDuplicatesLastWins(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podA, withIP(podA, "10.0.0.9")})
	if diff := cmp.Diff([]pod{withIP(podA, "10.0.0.9")}, c.List()); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func TestStaticUnsyncedSyncer(t *testing.T) {
	stop := newStop(t)
	syncer := krt.NewManualSyncer()
	c := krt.NewStaticCollection(syncer, []pod{podA}, krt.WithStop(stop))
	derived := krt.NewCollection(c, func(_ krt.HandlerContext, p pod) *pod { return &p }, krt.WithStop(stop))

	// The derived collection has processed the initial state, yet neither is
	// synced while the syncer is not.
	eventually(t, "derived output", func() bool { return derived.GetKey("ns/a") != nil })
	if c.HasSynced() || derived.HasSynced() {
		t.Fatalf("synced before the syncer: static=%v derived=%v", c.HasSynced(), derived.HasSynced())
	}
	closed := make(chan struct{})
	close(closed)
	if c.WaitUntilSynced(closed) {
		t.Fatal("WaitUntilSynced(closed stop) = true on an unsynced collection")
	}
	reg := c.Register(func(krt.Event[pod]) {})
	defer reg.UnregisterHandler()
	if reg.WaitUntilSynced(closed) {
		t.Fatal("registration synced before the collection")
	}

	syncer.MarkSynced()
	waitSynced(t, c)
	waitSynced(t, derived)
	waitSynced(t, reg)
}

func TestStaticRegisterReplaysSortedThenStreams(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podC, podA, podB})
	r := record(t, c)
	waitSynced(t, r.reg)
	// The registration is synced only after the replay was delivered.
	if n := len(r.list()); n != 3 {
		t.Fatalf("events when the registration synced = %d, want 3", n)
	}
	c.DeleteObject("ns/b")
	r.expect(t, addEv(podA), addEv(podB), addEv(podC), delEv(podB))
}

// batches collects what a RegisterBatch handler receives.
type batches struct {
	mu  sync.Mutex
	got [][]krt.Event[pod]
}

func (b *batches) add(es []krt.Event[pod]) {
	b.mu.Lock()
	b.got = append(b.got, append([]krt.Event[pod](nil), es...))
	b.mu.Unlock()
}

func (b *batches) flat() []krt.Event[pod] {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []krt.Event[pod]
	for _, es := range b.got {
		out = append(out, es...)
	}
	return out
}

func TestStaticRegisterBatch(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podB, podA})

	t.Run("existing state as one sorted batch", func(t *testing.T) {
		var b batches
		reg := c.RegisterBatch(b.add, true)
		defer reg.UnregisterHandler()
		waitSynced(t, reg)
		b.mu.Lock()
		first := b.got[0]
		b.mu.Unlock()
		if diff := cmp.Diff([]krt.Event[pod]{addEv(podA), addEv(podB)}, first); diff != "" {
			t.Errorf("first batch (-want +got):\n%s", diff)
		}
	})

	t.Run("only later events", func(t *testing.T) {
		var b batches
		reg := c.RegisterBatch(b.add, false)
		defer reg.UnregisterHandler()
		waitSynced(t, reg)
		c.UpdateObject(podC)
		eventually(t, "later event", func() bool { return len(b.flat()) >= 1 })
		if diff := cmp.Diff([]krt.Event[pod]{addEv(podC)}, b.flat()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		c.DeleteObject("ns/c")
	})
}

func TestStaticUnregisterHandlerStopsDelivery(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podA})
	before := krt.Stats(c).Registrations
	gone := record(t, c)
	stays := record(t, c)
	gone.expect(t, addEv(podA))
	if got := krt.Stats(c).Registrations; got != before+2 {
		t.Fatalf("registrations = %d, want %d", got, before+2)
	}

	gone.reg.UnregisterHandler()
	gone.reg.UnregisterHandler() // safe twice
	if got := krt.Stats(c).Registrations; got != before+1 {
		t.Errorf("registrations after unregister = %d, want %d", got, before+1)
	}
	c.UpdateObject(podB)
	stays.expect(t, addEv(podA), addEv(podB))
	if diff := cmp.Diff([]krt.Event[pod]{addEv(podA)}, gone.list()); diff != "" {
		t.Errorf("unregistered handler got events (-want +got):\n%s", diff)
	}
}

func TestStaticStopReleasesHandlers(t *testing.T) {
	stop := make(chan struct{})
	c := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop))
	r := record(t, c)
	r.expect(t, addEv(podA))
	close(stop)
	eventually(t, "handlers released", func() bool { return krt.Stats(c).Registrations == 0 })
}

func TestStaticEventShapes(t *testing.T) {
	c := krt.NewStaticCollection[pod](nil, nil)
	r := record(t, c)
	c.UpdateObject(podA)
	c.ConditionalUpdateObject(withIP(podA, "1.1.1.1"))
	c.Reset([]pod{podB})
	c.DeleteObjects(func(pod) bool { return true })
	got := r.wait(t, 5)
	checkEventShapes(t, got)
	var types []string
	for _, e := range got {
		types = append(types, e.Event.String())
	}
	if diff := cmp.Diff("add update delete add delete", strings.Join(types, " ")); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
}

func TestStaticSlowHandlerDelaysOnlyItself(t *testing.T) {
	c := krt.NewStaticCollection(nil, []pod{podA})
	release := make(chan struct{})
	blocked := c.Register(func(krt.Event[pod]) { <-release })
	defer blocked.UnregisterHandler()
	defer close(release)
	fast := record(t, c)
	c.UpdateObject(podB)
	fast.expect(t, addEv(podA), addEv(podB))
	if blocked.HasSynced() {
		t.Error("the blocked handler reports synced before it handled the initial state")
	}
}

func TestStaticConcurrentSetters(t *testing.T) {
	c := krt.NewStaticCollection[pod](nil, nil)
	r := record(t, c)
	const writers, each = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				p := pod{Name: fmt.Sprintf("p%d-%d", w, i), Namespace: "ns"}
				c.UpdateObject(p)
				if i%2 == 1 {
					c.DeleteObject(p.ResourceName())
				}
			}
		})
	}
	wg.Wait()
	if n := len(c.List()); n != writers*each/2 {
		t.Errorf("objects = %d, want %d", n, writers*each/2)
	}
	got := r.wait(t, writers*each*3/2)
	checkEventShapes(t, got)
	// Each key's events arrive in call order: add, then delete for odd i.
	seen := map[string]krt.EventType{}
	for _, e := range got {
		k := krt.GetKey(e.Latest())
		if prev, ok := seen[k]; (e.Event == krt.EventAdd && ok) || (e.Event == krt.EventDelete && prev != krt.EventAdd) {
			t.Fatalf("out-of-order %v for %s", e.Event, k)
		}
		seen[k] = e.Event
	}
}

func TestStaticRegistrationRemovedBeforeSync(t *testing.T) {
	stop := newStop(t)
	c := krt.NewStaticCollection(krt.NewManualSyncer(), []pod{podA}, krt.WithStop(stop))
	reg := c.Register(func(krt.Event[pod]) {})
	reg.UnregisterHandler()
	// WaitUntilSynced returns false once the registration is removed, before
	// the timeout closes its stop channel.
	timeout := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(timeout) })
	defer timer.Stop()
	if reg.WaitUntilSynced(timeout) {
		t.Fatal("removed registration reports synced")
	}
	select {
	case <-timeout:
		t.Fatal("WaitUntilSynced waited for the timeout instead of returning on removal")
	default:
	}
}

func TestEventLatestAndItems(t *testing.T) {
	a2 := withIP(podA, "2")
	cases := []struct {
		e      krt.Event[pod]
		latest pod
		items  []pod
	}{
		{addEv(podA), podA, []pod{podA}},
		{updEv(podA, a2), a2, []pod{podA, a2}},
		{delEv(podA), podA, []pod{podA}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.latest, tc.e.Latest()); diff != "" {
			t.Errorf("%v Latest (-want +got):\n%s", tc.e.Event, diff)
		}
		if diff := cmp.Diff(tc.items, tc.e.Items()); diff != "" {
			t.Errorf("%v Items (-want +got):\n%s", tc.e.Event, diff)
		}
	}
}
