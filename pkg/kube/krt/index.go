// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"fmt"
	"reflect"
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
// under its lock together with the objects.
type indexState[O any] struct {
	name    string
	coll    *store[O]
	extract func(*O) []string
	buckets map[string]map[string]*O
}

func (ix *indexState[O]) indexName() string             { return ix.name }
func (ix *indexState[O]) collectionUID() uint64         { return ix.coll.uid }
func (ix *indexState[O]) keysOf(obj any) []string       { return ix.extract(obj.(*O)) }
func (ix *indexState[O]) bucket(k string) map[string]*O { return ix.buckets[k] }

// update moves object key from the buckets of old to those of new. Either may
// be nil. Called with the store's write lock held.
func (ix *indexState[O]) update(key string, old, new *O) {
	if old != nil {
		for _, k := range ix.extract(old) {
			if b := ix.buckets[k]; b != nil {
				delete(b, key)
				if len(b) == 0 {
					delete(ix.buckets, k)
				}
			}
		}
	}
	if new != nil {
		for _, k := range ix.extract(new) {
			b := ix.buckets[k]
			if b == nil {
				b = map[string]*O{}
				ix.buckets[k] = b
			}
			b[key] = new
		}
	}
}

type index[K comparable, O any] struct {
	st *indexState[O]
}

// NewIndex returns an index of c named name: each object is filed under every
// key extract returns. Indexes are kept per collection by name: a second call
// with the same name returns the first index (extract must then be the same).
func NewIndex[K comparable, O any](c Collection[O], name string, extract func(o O) []K) Index[K, O] {
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
		buckets: map[string]map[string]*O{},
	}
	if sx, ok := any(extract).(func(O) []string); ok {
		ix.extract = func(o *O) []string { return sx(*o) }
	}
	for k, o := range s.objs {
		ix.update(k, nil, o)
	}
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
	return NewIndex(c, "namespace", func(o O) []string { return []string{nsOf(&o)} })
}

func (i index[K, O]) ref() indexRef { return i.st }

func (i index[K, O]) Lookup(k K) []O {
	s := i.st.coll
	s.mu.RLock()
	b := i.st.buckets[indexKeyString(k)]
	kv := make([]keyed[O], 0, len(b))
	for key, o := range b {
		kv = append(kv, keyed[O]{key, o})
	}
	s.mu.RUnlock()
	return valuesSorted(kv)
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

// valuesSorted sorts kv by key and returns copies of the values.
func valuesSorted[T any](kv []keyed[T]) []T {
	sortKeyed(kv)
	out := make([]T, len(kv))
	for i, e := range kv {
		out[i] = *e.obj
	}
	return out
}
