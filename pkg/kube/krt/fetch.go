// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"fmt"
	"slices"
)

// Fetch returns the objects of c that match every option, sorted by key, and
// records the read as a dependency of the running transformation: when c
// later changes, the transformation runs again for this input only if the
// changed object (old or new version) matches the same options.
//
// ctx must be the HandlerContext given to the transformation; Fetch panics
// otherwise, and when an option needs an accessor the element type lacks.
func Fetch[T any](ctx HandlerContext, c Collection[T], opts ...FetchOption) []T {
	return fetchWith(ctx, c.base(), FetchOption{}, opts)
}

// fetchWith is Fetch with one more option in front (Index.Fetch's index
// filter), without building a new option slice.
func fetchWith[T any](ctx HandlerContext, s *store[T], first FetchOption, opts []FetchOption) []T {
	hc := handlerContextOf(ctx)
	f := buildFilter(opts)
	if first.kind != filterNone {
		f.add(&first)
	}
	checkSupported(s, &f)
	src := hc.host.lookupSource(s.uid)
	if src == nil {
		if hc.host.isSelf(s.uid) {
			panic(selfFetchPanic(s.name))
		}
		src = newSource(s, hc.host.queue(), false)
		hc.host.addSource(src)
	}
	hc.deps = append(hc.deps, dependency{src: src, f: f})
	kv, sorted := s.fetch(&f)
	if !sorted {
		sortKeyed(kv)
	}
	out := make([]T, len(kv))
	for i, e := range kv {
		out[i] = *e.obj
	}
	return out
}

// FetchOne is Fetch returning the first match by key, or nil. Typically used
// with FilterKey.
func FetchOne[T any](ctx HandlerContext, c Collection[T], opts ...FetchOption) *T {
	res := Fetch(ctx, c, opts...)
	if len(res) == 0 {
		return nil
	}
	return &res[0]
}

// fetch returns the stored objects matching f with their keys, and whether
// they are already sorted by key. It reads the narrowest source the filter
// allows: the listed keys; the label bucket of the rarest pair of a
// FilterLabel, or the selector buckets of a FilterSelects (labelindex.go),
// unless an index bucket of the filter is smaller; one index bucket (sorted);
// or else every object.
func (s *store[T]) fetch(f *filter) (out []keyed[T], sorted bool) {
	if f.flags&flagNever != 0 {
		return nil, true
	}
	var buf [4]labelPair
	pairs := labelPairs(f, buf[:])
	byLabel := len(pairs) > 0 && f.flags&flagKeys == 0
	bySelector := !byLabel && f.flags&(flagSelects|flagKeys) == flagSelects
	if byLabel {
		s.ensureLabelIndex()
	}
	if bySelector {
		s.ensureSelectorIndex()
	}
	examined := 0
	s.mu.RLock()
	defer func() {
		s.mu.RUnlock()
		s.examined.Add(uint64(examined))
	}()
	var idx *indexState[T]
	if f.index != nil {
		idx = f.index.(*indexState[T])
	}
	// inIndex checks the index part of f for an object not read from its
	// bucket; a namespace index is implied by the per-namespace buckets.
	inIndex := func(o *T) bool {
		return idx == nil || idx.byNamespace || slices.Contains(idx.extract(o), f.indexKey)
	}
	ns, nsKnown := s.fetchNamespace(f, idx)
	switch {
	case f.flags&flagKeys != 0:
		for _, k := range f.keys {
			o := s.objs[k]
			if o == nil {
				continue
			}
			examined++
			if !matches(&s.ti, f, pairs, k, o) {
				continue
			}
			if idx != nil && !slices.Contains(idx.extract(o), f.indexKey) {
				continue
			}
			out = append(out, keyed[T]{k, o})
		}
		return out, false
	case byLabel:
		visit := func(ns string) {
			bucket := s.labelIdx.rarest(ns, pairs)
			examined += len(bucket)
			rest := pairs[1:] // pairs[0] is the bucket's pair
			for k, o := range bucket {
				if hasPairs(s.ti.labels(o), rest) && matchesBesidesLabels(&s.ti, f, k, o) && inIndex(o) {
					out = append(out, keyed[T]{k, o})
				}
			}
		}
		if !s.indexBucketSmaller(idx, f, func() int { return s.labelCandidates(ns, nsKnown, pairs) }) {
			if nsKnown {
				visit(ns)
			} else {
				for ns := range s.labelIdx.byNS {
					visit(ns)
				}
			}
			return out, false
		}
	case bySelector:
		withEmpty := f.flags&flagSelectsNonEmpty == 0
		fn := func(k string, o *T) {
			examined++
			if matches(&s.ti, f, nil, k, o) && inIndex(o) {
				out = append(out, keyed[T]{k, o})
			}
		}
		count := func() int {
			if nsKnown {
				return s.selectorIdx.candidates(ns, f.selects, withEmpty, nil)
			}
			n := 0
			for _, ns := range s.selectorIdx.namespaces() {
				n += s.selectorIdx.candidates(ns, f.selects, withEmpty, nil)
			}
			return n
		}
		if !s.indexBucketSmaller(idx, f, count) {
			if nsKnown {
				s.selectorIdx.candidates(ns, f.selects, withEmpty, fn)
			} else {
				for _, ns := range s.selectorIdx.namespaces() {
					s.selectorIdx.candidates(ns, f.selects, withEmpty, fn)
				}
			}
			return out, false
		}
	}
	if idx != nil {
		b := idx.bucket(f.indexKey)
		examined += len(b)
		for _, e := range b {
			if matches(&s.ti, f, pairs, e.key, e.obj) {
				out = append(out, e)
			}
		}
		return out, true
	}
	examined += len(s.objs)
	for k, o := range s.objs {
		if matches(&s.ti, f, pairs, k, o) {
			out = append(out, keyed[T]{k, o})
		}
	}
	return out, false
}

// fetchNamespace returns the one namespace f restricts a fetch to, if any:
// every object when T has no namespace (the label and selector indexes file
// them under ""), FilterNamespace, or a FilterIndex of NewNamespaceIndex.
func (s *store[T]) fetchNamespace(f *filter, idx *indexState[T]) (string, bool) {
	switch {
	case s.ti.namespace == nil:
		return "", true
	case f.flags&flagNamespace != 0:
		return f.extra.namespace, true
	case idx != nil && idx.byNamespace:
		return f.indexKey, true
	}
	return "", false
}

// labelCandidates is the number of objects a label fetch would read.
func (s *store[T]) labelCandidates(ns string, nsKnown bool, pairs []labelPair) int {
	if nsKnown {
		return len(s.labelIdx.rarest(ns, pairs))
	}
	n := 0
	for ns := range s.labelIdx.byNS {
		n += len(s.labelIdx.rarest(ns, pairs))
	}
	return n
}

// indexBucketSmaller reports whether f's index bucket (of an index other
// than a namespace index, which the label and selector buckets already
// narrow by) holds fewer objects than the label or selector buckets would
// (count).
func (s *store[T]) indexBucketSmaller(idx *indexState[T], f *filter, count func() int) bool {
	if idx == nil || idx.byNamespace {
		return false
	}
	return len(idx.bucket(f.indexKey)) < count()
}

// handlerCtx is the HandlerContext of one engine. The engine's goroutine runs
// one transformation at a time and resets deps before each.
type handlerCtx struct {
	host fetchHost
	deps []dependency
}

func (*handlerCtx) _handlerContext() {}

func handlerContextOf(ctx HandlerContext) *handlerCtx {
	hc, ok := ctx.(*handlerCtx)
	if !ok || hc == nil {
		panic("krt: Fetch called without the HandlerContext of a running transformation")
	}
	return hc
}

// fetchHost is the engine side of a handlerCtx.
type fetchHost interface {
	// lookupSource returns the engine's registration on collection uid.
	lookupSource(uid uint64) *source
	addSource(src *source)
	queue() *fifo[engineItem]
	// isSelf reports whether uid is one of the engine's own outputs.
	isSelf(uid uint64) bool
}

// dependency is one Fetch call of a transformation: the collection it read
// and the filter it read with.
type dependency struct {
	src *source
	f   filter
}

func depsEqual(a, b []dependency) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].src != b[i].src || !a[i].f.equal(&b[i].f) {
			return false
		}
	}
	return true
}

// source is one collection an engine is registered on: its parent, or a
// collection a transformation fetched. Only the engine's goroutine touches
// synced and rev.
type source struct {
	uid    uint64
	name   string
	ops    sourceOps
	synced bool
	rev    reverseIndex
	remove func()
}

// sourceOps is the typed half of a source.
type sourceOps interface {
	// eventKeys calls fn with the key of every event of a delivered batch.
	eventKeys(b any, fn func(k string))
	// collectDirty calls mark for every input with a dependency on src that
	// matches an old or new object of a delivered batch.
	collectDirty(d dependents, src *source, b any, mark func(in string))
}

// dependents is what collectDirty needs from the engine.
type dependents interface {
	depsOf(in string) []dependency
}

// batch is what a store delivers to an engine: the events with their keys.
type batch[T any] struct {
	events []Event[T]
	keys   []string
}

// engineItem is one entry of an engine's queue.
type engineItem struct {
	src    *source
	batch  any    // batch[T] of the source's type
	synced bool   // marker: everything src sent before was its initial state
	run    func() // a request to run on the engine's goroutine (debug dump)
}

// newSource registers q's engine on s. The primary source replays the current
// state; fetched sources deliver only later changes (the fetch itself read the
// current state after registering, so nothing falls in between).
func newSource[T any](s *store[T], q *fifo[engineItem], primary bool) *source {
	src := &source{uid: s.uid, name: s.name, ops: typedSource[T]{s}, rev: newReverseIndex()}
	r := s.register(
		func(events []Event[T], keys []string) { q.push(engineItem{src: src, batch: batch[T]{events, keys}}) },
		func() { q.push(engineItem{src: src, synced: true}) },
		primary, nil)
	src.remove = r.remove
	return src
}

type typedSource[T any] struct{ s *store[T] }

func (ts typedSource[T]) eventKeys(b any, fn func(k string)) {
	for _, k := range b.(batch[T]).keys {
		fn(k)
	}
}

func (ts typedSource[T]) collectDirty(d dependents, src *source, b any, mark func(in string)) {
	bt := b.(batch[T])
	for i, ev := range bt.events {
		k := bt.keys[i]
		if ev.Old != nil {
			ts.dirtyFor(d, src, k, ev.Old, mark)
		}
		if ev.New != nil {
			ts.dirtyFor(d, src, k, ev.New, mark)
		}
	}
}

// dirtyFor marks the inputs whose dependency on src matches object o (key k).
// Candidates come from the reverse index; each is confirmed against the
// input's recorded filters, so the reverse index may over-approximate but
// never miss.
func (ts typedSource[T]) dirtyFor(d dependents, src *source, k string, o *T, mark func(in string)) {
	ti := &ts.s.ti
	rev := &src.rev
	var idxKeys map[indexRef][]string
	keysOf := func(ref indexRef) []string {
		if ks, ok := idxKeys[ref]; ok {
			return ks
		}
		if idxKeys == nil {
			idxKeys = map[indexRef][]string{}
		}
		ks := ref.keysOf(o)
		idxKeys[ref] = ks
		return ks
	}
	check := func(in string) {
		for i := range d.depsOf(in) {
			dep := &d.depsOf(in)[i]
			if dep.src != src {
				continue
			}
			if dep.f.index != nil && !slices.Contains(keysOf(dep.f.index), dep.f.indexKey) {
				continue
			}
			if matches(ti, &dep.f, nil, k, o) {
				mark(in)
				return
			}
		}
	}
	for in := range rev.byKey[k] {
		check(in)
	}
	for ref := range rev.indexes {
		for _, ik := range keysOf(ref) {
			for in := range rev.byIndex[indexBucket{ref, ik}] {
				check(in)
			}
		}
	}
	if len(rev.byLabel) > 0 && ti.labels != nil {
		for lk, lv := range ti.labels(o) {
			for in := range rev.byLabel[labelPair{lk, lv}] {
				check(in)
			}
		}
	}
	if (len(rev.bySelects) > 0 || len(rev.selectsAny) > 0) && ti.selector != nil {
		sel := ti.selector(o)
		if len(sel) == 0 {
			for in := range rev.selectsAny {
				check(in)
			}
		} else {
			// Every dependent whose labels contain sel is filed under each
			// pair of sel; one pair finds them all.
			for lk, lv := range sel {
				for in := range rev.bySelects[labelPair{lk, lv}] {
					check(in)
				}
				break
			}
		}
	}
	if len(rev.byNamespace) > 0 && ti.namespace != nil {
		for in := range rev.byNamespace[ti.namespace(o)] {
			check(in)
		}
	}
	for in := range rev.scan {
		check(in)
	}
}

// keySet is a set of input keys with a reference count each (one input may
// record several dependencies filed under the same bucket).
type keySet map[string]int32

type indexBucket struct {
	ref indexRef
	key string
}

type labelPair struct{ k, v string }

// reverseIndex files each recorded dependency of an engine on one source under
// the narrowest bucket its filter allows, so a change finds its candidate
// inputs without scanning every input. Precedence: keys, index, labels,
// selects, namespace; a dependency with none of those is in scan.
type reverseIndex struct {
	byKey       map[string]keySet
	byIndex     map[indexBucket]keySet
	indexes     map[indexRef]int32
	byLabel     map[labelPair]keySet
	bySelects   map[labelPair]keySet
	selectsAny  keySet
	byNamespace map[string]keySet
	scan        keySet
}

func newReverseIndex() reverseIndex {
	return reverseIndex{
		byKey:       map[string]keySet{},
		byIndex:     map[indexBucket]keySet{},
		indexes:     map[indexRef]int32{},
		byLabel:     map[labelPair]keySet{},
		bySelects:   map[labelPair]keySet{},
		selectsAny:  keySet{},
		byNamespace: map[string]keySet{},
		scan:        keySet{},
	}
}

// file adds (delta 1) or removes (delta -1) input in's dependency f.
func (r *reverseIndex) file(in string, f *filter, delta int32) {
	switch {
	case f.flags&flagNever != 0:
		// Matches nothing: no change can make it match.
	case f.flags&flagKeys != 0:
		for _, k := range f.keys {
			bump(r.byKey, k, in, delta)
		}
	case f.index != nil:
		bump(r.byIndex, indexBucket{f.index, f.indexKey}, in, delta)
		if r.indexes[f.index] += delta; r.indexes[f.index] <= 0 {
			delete(r.indexes, f.index)
		}
	case f.flags&flagLabels != 0 && len(f.labels) > 0:
		bump(r.byLabel, smallestPair(f.labels), in, delta)
	case f.flags&flagSelects != 0:
		// An object with an empty selector matches FilterSelects for every
		// dependent; one with a non-empty selector only dependents whose
		// labels contain it, which are filed under each of their pairs.
		for lk, lv := range f.selects {
			bump(r.bySelects, labelPair{lk, lv}, in, delta)
		}
		if f.flags&flagSelectsNonEmpty == 0 {
			bumpSet(r.selectsAny, in, delta)
		}
	case f.flags&flagNamespace != 0:
		bump(r.byNamespace, f.extra.namespace, in, delta)
	default:
		bumpSet(r.scan, in, delta)
	}
}

func smallestPair(m map[string]string) labelPair {
	first := true
	var p labelPair
	for k, v := range m {
		if first || k < p.k {
			p, first = labelPair{k, v}, false
		}
	}
	return p
}

func bump[K comparable](m map[K]keySet, k K, in string, delta int32) {
	s := m[k]
	if s == nil {
		if delta < 0 {
			return
		}
		s = keySet{}
		m[k] = s
	}
	bumpSet(s, in, delta)
	if len(s) == 0 {
		delete(m, k)
	}
}

func bumpSet(s keySet, in string, delta int32) {
	if n := s[in] + delta; n > 0 {
		s[in] = n
	} else {
		delete(s, in)
	}
}

// size is the number of filed entries, for the debug dump.
func (r *reverseIndex) size() int {
	n := len(r.selectsAny) + len(r.scan)
	for _, m := range []map[string]keySet{r.byKey, r.byNamespace} {
		for _, s := range m {
			n += len(s)
		}
	}
	for _, s := range r.byIndex {
		n += len(s)
	}
	for _, m := range []map[labelPair]keySet{r.byLabel, r.bySelects} {
		for _, s := range m {
			n += len(s)
		}
	}
	return n
}

func selfFetchPanic(name string) string {
	return fmt.Sprintf("krt: collection %q fetches itself from its own transformation", name)
}
