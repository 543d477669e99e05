// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"slices"
	"strings"
)

// StaticCollection is an input collection whose contents the caller sets
// directly: tests, and file mode, where manifests read from disk feed the same
// pipeline that informers feed in a cluster. Setters may be called from any
// goroutine; each call is applied atomically and in call order.
type StaticCollection[T any] struct {
	*store[T]
}

var _ Collection[int] = StaticCollection[int]{}

// NewStaticCollection returns a collection holding vals. It is synced when
// synced is (nil means at once): file mode passes the syncer of its first
// full read. Elements of vals with the same key: the last one wins.
//
// The collection takes ownership of vals, as bytes.NewBuffer does of its
// argument: it keeps pointers into the slice instead of copying each element,
// so the caller must not modify vals afterwards. Later setters store their
// own copies and never write to vals.
func NewStaticCollection[T any](synced Syncer, vals []T, opts ...CollectionOption) StaticCollection[T] {
	o := buildOptions("Static["+typeName[T]()+"]", opts)
	ti := newTypeInfo[T]()
	s := newStore(o, ti, ti.mustKey())
	s.objs = make(map[string]*T, len(vals))
	changes := make([]change[T], len(vals))
	for i := range vals {
		changes[i] = change[T]{key: s.keyOf(&vals[i]), obj: &vals[i]}
	}
	s.apply(changes, true)
	c := StaticCollection[T]{s}
	if synced == nil {
		s.markSynced()
	} else {
		go func() {
			if synced.WaitUntilSynced(s.stop) {
				s.markSynced()
			}
		}()
	}
	registerDebug(o.debugger, s)
	s.closeOnStop() // after registerDebug: close reads onClose
	return c
}

// UpdateObject adds obj, or replaces the object with its key. It always emits
// an event, even when obj equals the stored object.
func (c StaticCollection[T]) UpdateObject(obj T) {
	c.apply([]change[T]{{key: c.keyOf(&obj), obj: &obj}}, true)
}

// ConditionalUpdateObject is UpdateObject, but emits nothing when obj equals
// the stored object.
func (c StaticCollection[T]) ConditionalUpdateObject(obj T) {
	c.apply([]change[T]{{key: c.keyOf(&obj), obj: &obj}}, false)
}

// ConditionalApply removes the objects with the keys in deletes, then adds
// or replaces each of updates (emitting nothing for one equal to the stored
// object), all in one batch: every handler and derived collection gets the
// changes together, as one round, instead of one event per call. Updates
// are applied in order: of several with one key, each emits its event and
// the last stays.
func (c StaticCollection[T]) ConditionalApply(deletes []string, updates []T) {
	changes := make([]change[T], 0, len(deletes)+len(updates))
	for _, k := range deletes {
		changes = append(changes, change[T]{key: k})
	}
	for i := range updates {
		v := updates[i]
		changes = append(changes, change[T]{key: c.keyOf(&v), obj: &v})
	}
	c.apply(changes, false)
}

// DeleteObject removes the object with key k, if any.
func (c StaticCollection[T]) DeleteObject(k string) {
	c.apply([]change[T]{{key: k}}, false)
}

// DeleteObjects removes every object for which match returns true. match
// runs under the collection's lock: it must not call the collection.
func (c StaticCollection[T]) DeleteObjects(match func(obj T) bool) {
	c.mutate(func(objs map[string]*T) []change[T] {
		var changes []change[T]
		for k, o := range objs {
			if match(*o) {
				changes = append(changes, change[T]{key: k})
			}
		}
		sortChanges(changes)
		return changes
	}, false)
}

// Reset replaces the whole contents with vals in one batch: objects missing
// from vals are deleted, new ones added, changed ones updated; objects equal to
// the stored ones emit nothing. Of several elements with one key, the last wins.
func (c StaticCollection[T]) Reset(vals []T) {
	next := make(map[string]*T, len(vals))
	order := make([]string, 0, len(vals))
	for i := range vals {
		v := vals[i]
		k := c.keyOf(&v)
		if _, dup := next[k]; !dup {
			order = append(order, k)
		}
		next[k] = &v
	}
	c.mutate(func(objs map[string]*T) []change[T] {
		var changes []change[T]
		for k := range objs {
			if _, keep := next[k]; !keep {
				changes = append(changes, change[T]{key: k})
			}
		}
		sortChanges(changes)
		for _, k := range order {
			changes = append(changes, change[T]{key: k, obj: next[k]})
		}
		return changes
	}, false)
}

func sortChanges[T any](changes []change[T]) {
	slices.SortFunc(changes, func(a, b change[T]) int { return strings.Compare(a.key, b.key) })
}
