// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

// The label and selector indexes of a store make FilterLabel and
// FilterSelects / FilterSelectsNonEmpty fetches cost the objects they can
// return instead of the whole namespace (or collection).
//
//   - labelIndex: per namespace, label pair (key=value) -> the objects whose
//     labels hold that pair. A FilterLabel(sel) fetch reads the bucket of the
//     rarest pair of sel (the smallest bucket) and tests the other pairs.
//   - selectorIndex: per namespace, each object with a non-empty selector is
//     filed under one pair of its selector (the one with the smallest key), and
//     objects with an empty selector in a set of their own. A selector is a
//     subset of lbls only if its filed pair is in lbls, so a FilterSelects(lbls)
//     fetch reads the buckets of lbls's pairs (plus the empty set for
//     FilterSelects) and tests each object's whole selector.
//
// A type without a namespace files everything under "". Both indexes are
// built on the first fetch that can use them (a collection never fetched by
// label pays nothing) and are then kept current by store.mutate under the
// write lock, together with the objects. Buckets hold the stored pointers.

// pairBuckets is one namespace's buckets: label pair -> key -> object.
type pairBuckets[T any] map[labelPair]map[string]*T

func (b pairBuckets[T]) put(p labelPair, key string, o *T) {
	m := b[p]
	if m == nil {
		m = map[string]*T{}
		b[p] = m
	}
	m[key] = o
}

func (b pairBuckets[T]) remove(p labelPair, key string) {
	m := b[p]
	delete(m, key)
	if len(m) == 0 {
		delete(b, p)
	}
}

// labelIndex: namespace -> label pair -> objects.
type labelIndex[T any] struct {
	byNS map[string]pairBuckets[T]
}

func newLabelIndex[T any](ti *typeInfo[T], objs map[string]*T) *labelIndex[T] {
	li := &labelIndex[T]{byNS: map[string]pairBuckets[T]{}}
	for k, o := range objs {
		li.update(ti, k, nil, o)
	}
	return li
}

// update moves object key from old's buckets to new's. Either may be nil.
func (li *labelIndex[T]) update(ti *typeInfo[T], key string, old, new *T) {
	newNS := namespaceOf(ti, new)
	if old != nil {
		oldNS := namespaceOf(ti, old)
		b := li.byNS[oldNS]
		var newLabels map[string]string
		if new != nil && newNS == oldNS {
			newLabels = ti.labels(new)
		}
		for k, v := range ti.labels(old) {
			if nv, ok := newLabels[k]; ok && nv == v {
				continue // kept: put below replaces the object
			}
			b.remove(labelPair{k, v}, key)
		}
		if len(b) == 0 {
			delete(li.byNS, oldNS)
		}
	}
	if new == nil {
		return
	}
	lbls := ti.labels(new)
	if len(lbls) == 0 {
		return
	}
	b := li.byNS[newNS]
	if b == nil {
		b = pairBuckets[T]{}
		li.byNS[newNS] = b
	}
	for k, v := range lbls {
		b.put(labelPair{k, v}, key, new)
	}
}

// rarest moves the pair of pairs with the smallest bucket in namespace ns
// to pairs[0] and returns that bucket (nil when some pair has no object,
// since then nothing matches).
func (li *labelIndex[T]) rarest(ns string, pairs []labelPair) map[string]*T {
	b := li.byNS[ns]
	if b == nil {
		return nil
	}
	var best map[string]*T
	for i, p := range pairs {
		m := b[p]
		if len(m) == 0 {
			return nil
		}
		if best == nil || len(m) < len(best) {
			best = m
			pairs[0], pairs[i] = pairs[i], pairs[0]
		}
	}
	return best
}

// selectorIndex: namespace -> filed pair of each non-empty selector ->
// objects, and namespace -> objects with an empty selector.
type selectorIndex[T any] struct {
	byNS  map[string]pairBuckets[T]
	empty map[string]map[string]*T
}

func newSelectorIndex[T any](ti *typeInfo[T], objs map[string]*T) *selectorIndex[T] {
	si := &selectorIndex[T]{byNS: map[string]pairBuckets[T]{}, empty: map[string]map[string]*T{}}
	for k, o := range objs {
		si.update(ti, k, nil, o)
	}
	return si
}

func (si *selectorIndex[T]) update(ti *typeInfo[T], key string, old, new *T) {
	if old != nil {
		ns := namespaceOf(ti, old)
		if sel := ti.selector(old); len(sel) == 0 {
			delete(si.empty[ns], key)
			if len(si.empty[ns]) == 0 {
				delete(si.empty, ns)
			}
		} else if b := si.byNS[ns]; b != nil {
			b.remove(smallestPair(sel), key)
			if len(b) == 0 {
				delete(si.byNS, ns)
			}
		}
	}
	if new == nil {
		return
	}
	ns := namespaceOf(ti, new)
	sel := ti.selector(new)
	if len(sel) == 0 {
		m := si.empty[ns]
		if m == nil {
			m = map[string]*T{}
			si.empty[ns] = m
		}
		m[key] = new
		return
	}
	b := si.byNS[ns]
	if b == nil {
		b = pairBuckets[T]{}
		si.byNS[ns] = b
	}
	b.put(smallestPair(sel), key, new)
}

// candidates calls fn with every object of namespace ns whose selector may be
// a subset of lbls: those filed under a pair of lbls, and with withEmpty those
// with an empty selector. It returns the number of objects it would visit
// when fn is nil.
func (si *selectorIndex[T]) candidates(ns string, lbls map[string]string, withEmpty bool, fn func(k string, o *T)) int {
	n := 0
	visit := func(m map[string]*T) {
		n += len(m)
		if fn == nil {
			return
		}
		for k, o := range m {
			fn(k, o)
		}
	}
	if b := si.byNS[ns]; b != nil {
		for k, v := range lbls {
			visit(b[labelPair{k, v}])
		}
	}
	if withEmpty {
		visit(si.empty[ns])
	}
	return n
}

// namespaces returns the namespaces that hold an object of the index.
func (si *selectorIndex[T]) namespaces() []string {
	out := make([]string, 0, len(si.byNS)+len(si.empty))
	for ns := range si.byNS {
		out = append(out, ns)
	}
	for ns := range si.empty {
		if _, dup := si.byNS[ns]; !dup {
			out = append(out, ns)
		}
	}
	return out
}

func namespaceOf[T any](ti *typeInfo[T], o *T) string {
	if o == nil || ti.namespace == nil {
		return ""
	}
	return ti.namespace(o)
}

// ensureLabelIndex builds the label index on first use.
func (s *store[T]) ensureLabelIndex() {
	if s.hasLabelIndex.Load() {
		return
	}
	s.mu.Lock()
	if s.labelIdx == nil {
		s.labelIdx = newLabelIndex(&s.ti, s.objs)
		s.hasLabelIndex.Store(true)
	}
	s.mu.Unlock()
}

// ensureSelectorIndex builds the selector index on first use.
func (s *store[T]) ensureSelectorIndex() {
	if s.hasSelectorIndex.Load() {
		return
	}
	s.mu.Lock()
	if s.selectorIdx == nil {
		s.selectorIdx = newSelectorIndex(&s.ti, s.objs)
		s.hasSelectorIndex.Store(true)
	}
	s.mu.Unlock()
}
