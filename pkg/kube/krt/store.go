// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

var uidCounter atomic.Uint64

// store is the state every collection kind shares: the objects by key, the
// indexes over them, the registered handlers and the sync state. Exactly one
// goroutine writes a store (the collection's own, or the caller of a static
// collection's setters, serialized by mu); readers take the read lock.
//
// Objects are stored by pointer and never modified after they are stored, so
// reads, events and index buckets share them without copying.
type store[T any] struct {
	name string
	uid  uint64
	ti   typeInfo[T]
	// keyOf is the key of a stored object. Usually ti.key; singletons and
	// status collections supply their own.
	keyOf func(*T) string
	stop  <-chan struct{}

	mu      sync.RWMutex
	objs    map[string]*T
	indexes []*indexState[T]
	// labelIdx and selectorIdx serve FilterLabel and FilterSelects fetches
	// (labelindex.go); nil until the first such fetch.
	labelIdx    *labelIndex[T]
	selectorIdx *selectorIndex[T]
	regs        []*registration[T]
	closed      bool // stop has closed; new registrations are released at once

	synced   atomic.Bool
	syncedCh chan struct{}
	// hasLabelIndex and hasSelectorIndex are set once labelIdx and
	// selectorIdx exist, so fetches check without the write lock.
	hasLabelIndex    atomic.Bool
	hasSelectorIndex atomic.Bool
	// examined counts the objects fetches have tested against their filters.
	examined atomic.Uint64

	metrics *collectionMetrics
	// transformations counts transformation runs of a derived collection.
	transformations atomic.Uint64
	// describe adds the per-input view of a derived collection to the dump.
	describe func() *DerivedDump
	// onClose run when the store closes (leaving a DebugHandler).
	onClose []func()
}

func newStore[T any](o collectionOptions, ti typeInfo[T], keyOf func(*T) string) *store[T] {
	s := &store[T]{
		name:     o.name,
		uid:      uidCounter.Add(1),
		ti:       ti,
		keyOf:    keyOf,
		stop:     o.stop,
		objs:     map[string]*T{},
		syncedCh: make(chan struct{}),
		metrics:  newCollectionMetrics(o.name),
	}
	return s
}

// closeOnStop starts a goroutine that closes the store when its stop channel
// closes. Collection kinds without a goroutine of their own call it; derived
// collections close their store when their run loop ends.
func (s *store[T]) closeOnStop() {
	if s.stop == nil {
		return
	}
	go func() {
		<-s.stop
		s.close()
	}()
}

// change is one write to a store: the object at key becomes obj (nil deletes).
type change[T any] struct {
	key string
	obj *T
}

// apply writes changes in order, maintains the indexes, and sends the
// resulting events to every registration, all under the write lock so that a
// concurrent Register sees either none or all of them. Unless always is set,
// an update whose object equals the stored one is dropped. It returns the
// events sent.
func (s *store[T]) apply(changes []change[T], always bool) []Event[T] {
	if len(changes) == 0 {
		return nil
	}
	return s.mutate(func(map[string]*T) []change[T] { return changes }, always)
}

// mutate is apply with the changes computed from the current objects under
// the write lock, so read-modify-write setters (Reset) are atomic. compute
// must not modify objs or call back into the collection.
func (s *store[T]) mutate(compute func(objs map[string]*T) []change[T], always bool) []Event[T] {
	s.mu.Lock()
	changes := compute(s.objs)
	events := make([]Event[T], 0, len(changes))
	keys := make([]string, 0, len(changes))
	for _, c := range changes {
		old := s.objs[c.key]
		switch {
		case c.obj == nil && old == nil:
			continue
		case c.obj == nil:
			delete(s.objs, c.key)
			events = append(events, Event[T]{Old: old, Event: EventDelete})
		case old == nil:
			s.objs[c.key] = c.obj
			events = append(events, Event[T]{New: c.obj, Event: EventAdd})
		default:
			if !always && s.ti.equal(old, c.obj) {
				continue
			}
			s.objs[c.key] = c.obj
			events = append(events, Event[T]{Old: old, New: c.obj, Event: EventUpdate})
		}
		keys = append(keys, c.key)
		for _, idx := range s.indexes {
			idx.update(c.key, old, c.obj)
		}
		if s.labelIdx != nil {
			s.labelIdx.update(&s.ti, c.key, old, c.obj)
		}
		if s.selectorIdx != nil {
			s.selectorIdx.update(&s.ti, c.key, old, c.obj)
		}
	}
	if len(events) > 0 {
		for _, r := range s.regs {
			r.deliver(events, keys)
		}
	}
	size := len(s.objs)
	s.mu.Unlock()
	observeEvents(s.metrics, events, size)
	return events
}

// get returns the stored object (shared, read-only) or nil.
func (s *store[T]) get(k string) *T {
	s.mu.RLock()
	o := s.objs[k]
	s.mu.RUnlock()
	return o
}

// GetKey returns the object with key k, or nil. Shared: do not modify.
func (s *store[T]) GetKey(k string) *T { return s.get(k) }

// List returns every object, sorted by key.
func (s *store[T]) List() []T {
	s.mu.RLock()
	kv := make([]keyed[T], 0, len(s.objs))
	for k, o := range s.objs {
		kv = append(kv, keyed[T]{k, o})
	}
	s.mu.RUnlock()
	sortKeyed(kv)
	out := make([]T, len(kv))
	for i, e := range kv {
		out[i] = *e.obj
	}
	return out
}

// keyed is an object with its key, used to sort fetch results without
// recomputing keys.
type keyed[T any] struct {
	key string
	obj *T
}

func sortKeyed[T any](kv []keyed[T]) {
	slices.SortFunc(kv, func(a, b keyed[T]) int { return strings.Compare(a.key, b.key) })
}

// snapshotLocked returns the current objects as add events sorted by key,
// with their keys. Callers hold mu.
func (s *store[T]) snapshotLocked() ([]Event[T], []string) {
	kv := make([]keyed[T], 0, len(s.objs))
	for k, o := range s.objs {
		kv = append(kv, keyed[T]{k, o})
	}
	sortKeyed(kv)
	events := make([]Event[T], len(kv))
	keys := make([]string, len(kv))
	for i, e := range kv {
		events[i] = Event[T]{New: e.obj, Event: EventAdd}
		keys[i] = e.key
	}
	return events, keys
}

func (s *store[T]) base() *store[T] { return s }

// HasSynced is true once the collection has processed its initial state.
func (s *store[T]) HasSynced() bool { return s.synced.Load() }

// WaitUntilSynced blocks until the collection has synced or stop closes.
func (s *store[T]) WaitUntilSynced(stop <-chan struct{}) bool {
	select {
	case <-s.syncedCh:
		return true
	default:
	}
	select {
	case <-s.syncedCh:
		return true
	case <-stop:
		return false
	}
}

// markSynced records that the initial state is in the store and tells every
// registration, in order after the events already sent. Idempotent.
func (s *store[T]) markSynced() {
	s.mu.Lock()
	if !s.synced.Load() {
		s.synced.Store(true)
		close(s.syncedCh)
		for _, r := range s.regs {
			r.markSynced()
		}
	}
	s.mu.Unlock()
}

// Register calls f for every event; see EventStream.
func (s *store[T]) Register(f func(o Event[T])) HandlerRegistration {
	return s.RegisterBatch(func(events []Event[T]) {
		for _, e := range events {
			f(e)
		}
	}, true)
}

// RegisterBatch calls f with batches of events; see EventStream.
func (s *store[T]) RegisterBatch(f func(o []Event[T]), runExistingState bool) HandlerRegistration {
	h := newHandlerQueue(f)
	h.reg = s.register(h.deliver, h.markSynced, runExistingState, h.stopDelivery)
	return h
}

// register adds a registration whose deliver and synced callbacks run under
// the store's lock and must not block. With runExistingState the current
// objects are delivered first. The returned registration removes itself.
func (s *store[T]) register(deliver func([]Event[T], []string), synced func(), runExistingState bool, onRemove func()) *registration[T] {
	r := &registration[T]{store: s, deliver: deliver, markSynced: synced, onRemove: onRemove}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if onRemove != nil {
			onRemove()
		}
		return r
	}
	if runExistingState && len(s.objs) > 0 {
		deliver(s.snapshotLocked())
	}
	if s.synced.Load() {
		synced()
	}
	s.regs = append(s.regs, r)
	s.mu.Unlock()
	return r
}

func (s *store[T]) unregister(r *registration[T]) {
	s.mu.Lock()
	if i := slices.Index(s.regs, r); i >= 0 {
		s.regs = slices.Delete(s.regs, i, i+1)
	}
	s.mu.Unlock()
}

// registrationCount is the number of live registrations (for leak tests).
func (s *store[T]) registrationCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.regs)
}

// close releases every registration on this store; called when the
// collection's stop channel closes.
func (s *store[T]) close() {
	s.mu.Lock()
	regs := s.regs
	s.regs = nil
	s.closed = true
	s.mu.Unlock()
	for _, r := range regs {
		if r.onRemove != nil {
			r.onRemove()
		}
	}
	s.metrics.deleteSeries()
	for _, f := range s.onClose {
		f()
	}
}

// registration links a store to one consumer.
type registration[T any] struct {
	store      *store[T]
	deliver    func(events []Event[T], keys []string)
	markSynced func()
	onRemove   func()
	once       sync.Once
}

// remove unregisters; safe to call more than once.
func (r *registration[T]) remove() {
	r.once.Do(func() {
		r.store.unregister(r)
		if r.onRemove != nil {
			r.onRemove()
		}
	})
}
