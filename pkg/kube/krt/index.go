// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unsafe"
)

// Index files the objects of a collection under keys computed from each
// object, and keeps itself current as the collection changes.
type Index[K comparable, O any] interface {
	// Lookup returns the objects filed under k, sorted by their keys. Use it
	// outside transformations; inside, use Fetch so the read is tracked.
	Lookup(k K) []O
	// Fetch is Fetch(ctx, collection, FilterIndex(index, k), opts...): a
	// tracked read for use inside a transformation.
	Fetch(ctx HandlerContext, k K, opts ...FetchOption) []O

	ref() indexRef
}

// indexRef is the type-erased view of an index that filters hold.
type indexRef interface {
	indexName() string
	collectionUID() uint64
	// keysOf returns the index keys of obj, which is a *O of the index's
	// collection.
	keysOf(obj any) []string
}

// indexState is an index's data, kept in the collection's store and updated
// under its lock together with the objects. Each bucket is a slice sorted by
// object key: compact (no hash-table slack), contiguous to scan, and already
// in the order Fetch and Lookup return.
type indexState[O any] struct {
	name    string
	coll    *store[O]
	extract func(*O) []string
	buckets map[string][]keyed[O]
	// byNamespace: built by NewNamespaceIndex, so its key is the object's
	// namespace and a fetch through it can use the per-namespace label and
	// selector buckets.
	byNamespace bool
}

func (ix *indexState[O]) indexName() string       { return ix.name }
func (ix *indexState[O]) collectionUID() uint64   { return ix.coll.uid }
func (ix *indexState[O]) keysOf(obj any) []string { return ix.extract(obj.(*O)) }
func (ix *indexState[O]) bucket(k string) []keyed[O] {
	return ix.buckets[k]
}

// update moves object key from the buckets of old to those of new. Either may
// be nil. Called with the store's write lock held.
func (ix *indexState[O]) update(key string, old, new *O) {
	var oldKeys, newKeys []string
	if old != nil {
		oldKeys = ix.extract(old)
	}
	if new != nil {
		newKeys = ix.extract(new)
	}
	for _, k := range oldKeys {
		if !slices.Contains(newKeys, k) {
			ix.remove(k, key)
		}
	}
	for _, k := range newKeys {
		ix.put(k, key, new)
	}
}

func (ix *indexState[O]) put(k, key string, o *O) {
	b := ix.buckets[k]
	i, found := slices.BinarySearchFunc(b, key, cmpKeyed[O])
	if found {
		b[i].obj = o
		return
	}
	ix.buckets[k] = slices.Insert(b, i, keyed[O]{key, o})
}

func (ix *indexState[O]) remove(k, key string) {
	b := ix.buckets[k]
	i, found := slices.BinarySearchFunc(b, key, cmpKeyed[O])
	if !found {
		return
	}
	b = slices.Delete(b, i, i+1)
	switch {
	case len(b) == 0:
		delete(ix.buckets, k)
		return
	case cap(b) > 64 && len(b) < cap(b)/4:
		b = slices.Clip(slices.Clone(b)) // give memory back after a large shrink
	}
	ix.buckets[k] = b
}

// build fills an empty index from objs: append, then sort each bucket once.
func (ix *indexState[O]) build(objs map[string]*O) {
	for key, o := range objs {
		for _, k := range ix.extract(o) {
			ix.buckets[k] = append(ix.buckets[k], keyed[O]{key, o})
		}
	}
	for k, b := range ix.buckets {
		sortKeyed(b)
		// extract may name one key twice for an object: keep one entry.
		b = slices.CompactFunc(b, func(x, y keyed[O]) bool { return x.key == y.key })
		ix.buckets[k] = slices.Clip(b)
	}
}

func cmpKeyed[O any](e keyed[O], key string) int { return strings.Compare(e.key, key) }

type index[K comparable, O any] struct {
	st *indexState[O]
}

// NewIndex returns an index of c named name: each object is filed under every
// key extract returns. Indexes are kept per collection by name: a second call
// with the same name returns the first index (extract must then be the same).
func NewIndex[K comparable, O any](c Collection[O], name string, extract func(o O) []K) Index[K, O] {
	return newIndex(c, name, extract, false)
}

func newIndex[K comparable, O any](c Collection[O], name string, extract func(o O) []K, byNamespace bool) Index[K, O] {
	s := c.base()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ix := range s.indexes {
		if ix.name == name {
			return index[K, O]{st: ix}
		}
	}
	ix := &indexState[O]{
		name: name,
		coll: s,
		extract: func(o *O) []string {
			ks := extract(*o)
			out := make([]string, len(ks))
			for i, k := range ks {
				out[i] = indexKeyString(k)
			}
			return out
		},
		buckets:     map[string][]keyed[O]{},
		byNamespace: byNamespace,
	}
	if sx, ok := any(extract).(func(O) []string); ok {
		ix.extract = func(o *O) []string { return sx(*o) }
	}
	ix.build(s.objs)
	s.indexes = append(s.indexes, ix)
	return index[K, O]{st: ix}
}

// NewNamespaceIndex indexes c by namespace (Namespacer or Kubernetes
// metadata). It panics, naming the type, when O has no namespace.
func NewNamespaceIndex[O any](c Collection[O]) Index[string, O] {
	nsOf := c.base().ti.namespace
	if nsOf == nil {
		panic(fmt.Sprintf("krt: NewNamespaceIndex on collection %q: type %s has no GetNamespace()", c.base().name, typeName[O]()))
	}
	return newIndex(c, "namespace", func(o O) []string { return []string{nsOf(&o)} }, true)
}

func (i index[K, O]) ref() indexRef { return i.st }

func (i index[K, O]) Lookup(k K) []O {
	s := i.st.coll
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := i.st.buckets[indexKeyString(k)]
	out := make([]O, len(b))
	for j, e := range b {
		out[j] = *e.obj
	}
	return out
}

func (i index[K, O]) Fetch(ctx HandlerContext, k K, opts ...FetchOption) []O {
	return fetchWith(ctx, i.st.coll, FetchOption{kind: filterIndex, idx: i.st, str: indexKeyString(k)}, opts)
}

// indexKeyString turns an index key into the string the buckets use: strings
// (and types whose underlying type is string) as they are, Stringers through
// String, anything else through fmt.
func indexKeyString[K comparable](k K) string {
	if reflect.TypeFor[K]().Kind() == reflect.String {
		// K's underlying type is string: reinterpret without boxing.
		return *(*string)(unsafe.Pointer(&k))
	}
	if s, ok := any(k).(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprint(k)
}
