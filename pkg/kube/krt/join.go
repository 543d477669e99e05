// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import "slices"

// JoinCollection presents several collections of one type as one. When more
// than one holds a key, the collection listed first wins; when it drops the
// key, the next one that holds it takes over (an update event, or none if the
// objects are equal). The join is synced once every member is.
func JoinCollection[T any](cs []Collection[T], opts ...CollectionOption) Collection[T] {
	o := buildOptions("Join["+typeName[T]()+"]", opts)
	ti := newTypeInfo[T]()
	j := &join[T]{
		store:   newStore(o, ti, ti.mustKey()),
		members: make([]*store[T], len(cs)),
		q:       newFIFO[engineItem](),
		stop:    o.stop,
	}
	for i, c := range cs {
		j.members[i] = c.base()
	}
	registerDebug(o.debugger, j.store)
	for _, m := range j.members {
		j.sources = append(j.sources, newSource(m, j.q, true))
	}
	if len(j.members) == 0 {
		j.synced = true
		j.store.markSynced()
	}
	go j.run()
	return j.store
}

type join[T any] struct {
	store   *store[T]
	members []*store[T]
	sources []*source
	q       *fifo[engineItem]
	stop    <-chan struct{}
	synced  bool
}

func (j *join[T]) run() {
	defer func() {
		for _, src := range j.sources {
			src.remove()
		}
		j.store.close()
	}()
	for {
		items := j.q.take(j.stop)
		if items == nil {
			return
		}
		var keys []string
		seen := map[string]struct{}{}
		for _, it := range items {
			if it.synced {
				it.src.synced = true
				continue
			}
			it.src.ops.eventKeys(it.batch, func(k string) {
				if _, ok := seen[k]; !ok {
					seen[k] = struct{}{}
					keys = append(keys, k)
				}
			})
		}
		slices.Sort(keys)
		changes := make([]change[T], len(keys))
		for i, k := range keys {
			changes[i] = change[T]{key: k, obj: j.lookup(k)}
		}
		j.store.apply(changes, false)
		clear(items)
		if !j.synced && !slices.ContainsFunc(j.sources, func(s *source) bool { return !s.synced }) {
			j.synced = true
			j.store.markSynced()
		}
	}
}

// lookup returns the object the join shows for k: the first member's.
func (j *join[T]) lookup(k string) *T {
	for _, m := range j.members {
		if o := m.get(k); o != nil {
			return o
		}
	}
	return nil
}
