// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Small helpers shared by the per-concept tests. The test types (pod, service,
// endpoints) live in testtypes_test.go; eventually and endpointsOf in
// collection_test.go.

// newStop returns a stop channel closed when the test ends.
func newStop(t *testing.T) chan struct{} {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return stop
}

// waitSynced fails the test unless s syncs within 10 s.
func waitSynced(t *testing.T, s krt.Syncer) {
	t.Helper()
	timeout := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(timeout) })
	defer timer.Stop()
	if !s.WaitUntilSynced(timeout) {
		t.Fatal("timed out waiting for sync")
	}
}

// registerer is what a Collection and a Singleton share for subscriptions.
type registerer[T any] interface {
	Register(f func(o krt.Event[T])) krt.HandlerRegistration
}

// recorder collects the events one handler received, in order.
type recorder[T any] struct {
	mu     sync.Mutex
	events []krt.Event[T]
	reg    krt.HandlerRegistration
}

// record registers a recorder on c; it is unregistered when the test ends.
func record[T any](t *testing.T, c registerer[T]) *recorder[T] {
	t.Helper()
	r := &recorder[T]{}
	r.reg = c.Register(func(e krt.Event[T]) {
		r.mu.Lock()
		r.events = append(r.events, e)
		r.mu.Unlock()
	})
	t.Cleanup(r.reg.UnregisterHandler)
	return r
}

func (r *recorder[T]) list() []krt.Event[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]krt.Event[T](nil), r.events...)
}

// wait waits until at least n events arrived and returns all of them.
func (r *recorder[T]) wait(t *testing.T, n int) []krt.Event[T] {
	t.Helper()
	eventually(t, "events", func() bool { return len(r.list()) >= n })
	return r.list()
}

// expect waits for len(want) events and fails unless they are exactly want.
// A wrong extra event that arrived before the last wanted one shows up here,
// because a handler receives events in order.
func (r *recorder[T]) expect(t *testing.T, want ...krt.Event[T]) {
	t.Helper()
	got := r.wait(t, len(want))
	checkEventShapes(t, got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

func addEv[T any](n T) krt.Event[T]    { return krt.Event[T]{New: &n, Event: krt.EventAdd} }
func updEv[T any](o, n T) krt.Event[T] { return krt.Event[T]{Old: &o, New: &n, Event: krt.EventUpdate} }
func delEv[T any](o T) krt.Event[T]    { return krt.Event[T]{Old: &o, Event: krt.EventDelete} }

// checkEventShapes checks the Event contract: Old and New never both nil; an
// add carries New only, an update both, a delete Old only.
func checkEventShapes[T any](t *testing.T, events []krt.Event[T]) {
	t.Helper()
	for i, e := range events {
		var ok bool
		switch e.Event {
		case krt.EventAdd:
			ok = e.Old == nil && e.New != nil
		case krt.EventUpdate:
			ok = e.Old != nil && e.New != nil
		case krt.EventDelete:
			ok = e.Old != nil && e.New == nil
		}
		if !ok {
			t.Errorf("event %d: type %v with Old set=%v, New set=%v", i, e.Event, e.Old != nil, e.New != nil)
		}
	}
}

// keysOf returns the keys of objs, in order.
func keysOf[T any](objs []T) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = krt.GetKey(o)
	}
	return out
}

// mustPanic runs f and returns the panic value as a string; it fails the test
// when f does not panic.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("expected a panic")
		}
		msg, _ = r.(string)
		if msg == "" {
			if err, ok := r.(error); ok {
				msg = err.Error()
			}
		}
	}()
	f()
	return ""
}

// query is a named input of a test's derived collection; the transformation
// decides from the name what to fetch.
type query struct{ Name string }

func (q query) ResourceName() string { return q.Name }

// view is what a test's derived collection outputs: a description of what the
// transformation fetched for one query.
type view struct {
	Name  string
	Items []string
}

func (v view) ResourceName() string { return v.Name }

// itemsOf returns the Items of the view with key k, or nil.
func itemsOf(c krt.Collection[view], k string) []string {
	if v := c.GetKey(k); v != nil {
		return v.Items
	}
	return nil
}
