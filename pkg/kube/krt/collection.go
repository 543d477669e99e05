// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"
)

// NewCollection derives one output (or none, when f returns nil) from each
// object of c. Outputs are keyed by their own key, which may differ from the
// input's; see engine for what happens when two inputs produce one key.
func NewCollection[I, O any](c Collection[I], f TransformationSingle[I, O], opts ...CollectionOption) Collection[O] {
	e := newEngine[I, O, struct{}](c, typeName[O](), opts, func(ctx HandlerContext, in I, out []*O) ([]*O, *struct{}) {
		if o := f(ctx, in); o != nil {
			out = append(out, o)
		}
		return out, nil
	}, nil)
	e.start()
	return e.store
}

// NewManyCollection derives any number of outputs from each object of c.
func NewManyCollection[I, O any](c Collection[I], f TransformationMulti[I, O], opts ...CollectionOption) Collection[O] {
	e := newEngine[I, O, struct{}](c, typeName[O](), opts, func(ctx HandlerContext, in I, out []*O) ([]*O, *struct{}) {
		return appendPointers(out, f(ctx, in)), nil
	}, nil)
	e.start()
	return e.store
}

// engine runs the transformations of one derived collection. It owns one
// goroutine that takes everything queued (events from its parent and from
// every collection its transformations fetched), works out which inputs are
// affected, runs their transformations, and writes the changed outputs to its
// store in one batch. Everything but the store is touched only by that
// goroutine, so it needs no lock.
//
// Output keys: when two inputs produce outputs with one key, the input with
// the smaller key wins; the other output is kept aside and takes over when
// the winner stops producing the key. The result never depends on the order in
// which inputs were processed.
type engine[I, O, S any] struct {
	store  *store[O]
	status *store[ObjectWithStatus[I, S]] // nil unless a status collection
	parent *store[I]
	// transform appends the input's outputs to out. The engine keeps the
	// pointers: a transformation hands its results over and must not modify
	// them afterwards.
	transform func(ctx HandlerContext, in I, out []*O) ([]*O, *S)
	outKey    func(*O) string

	q       *fifo[engineItem]
	stop    <-chan struct{}
	primary *source
	sources map[uint64]*source

	inputs map[string]*inputState
	// foreignOwner maps an output key to the input that produced it, when that
	// input's key differs from the output key (otherwise the owner is implied).
	foreignOwner map[string]string
	// shadowed holds outputs that lost a key conflict: output key -> input -> value.
	shadowed map[string]map[string]*O

	ctx     handlerCtx
	outBuf  []*O
	keyBuf  []string
	dirty   map[string]struct{}
	order   []string
	pending map[string]*O // outputs changed in this round; nil value = deleted
	pendOrd []string
	synced  bool
}

// inputState is what the engine remembers about one input: the keys of its
// outputs and the dependencies its last run recorded. Most inputs have one
// output and one dependency; those live in the inline arrays, so an input
// costs one allocation.
type inputState struct {
	out    []string
	deps   []dependency
	outArr [1]string
	depArr [1]dependency
}

func newEngine[I, O, S any](c Collection[I], defaultName string, opts []CollectionOption,
	transform func(HandlerContext, I, []*O) ([]*O, *S), outKey func(*O) string,
) *engine[I, O, S] {
	o := buildOptions(defaultName, opts)
	ti := newTypeInfo[O]()
	if outKey == nil {
		outKey = ti.mustKey()
	}
	e := &engine[I, O, S]{
		store:        newStore(o, ti, outKey),
		parent:       c.base(),
		transform:    transform,
		outKey:       outKey,
		q:            newFIFO[engineItem](),
		stop:         o.stop,
		sources:      map[uint64]*source{},
		inputs:       map[string]*inputState{},
		foreignOwner: map[string]string{},
		shadowed:     map[string]map[string]*O{},
		dirty:        map[string]struct{}{},
		pending:      map[string]*O{},
	}
	e.ctx.host = e
	e.store.describe = e.describe
	registerDebug(o.debugger, e.store)
	return e
}

// start registers on the parent and starts the goroutine.
func (e *engine[I, O, S]) start() {
	e.primary = newSource(e.parent, e.q, true)
	e.sources[e.primary.uid] = e.primary
	go e.run()
}

func (e *engine[I, O, S]) lookupSource(uid uint64) *source { return e.sources[uid] }
func (e *engine[I, O, S]) addSource(src *source)           { e.sources[src.uid] = src }
func (e *engine[I, O, S]) queue() *fifo[engineItem]        { return e.q }
func (e *engine[I, O, S]) isSelf(uid uint64) bool {
	return uid == e.store.uid || (e.status != nil && uid == e.status.uid)
}
func (e *engine[I, O, S]) depsOf(in string) []dependency {
	if st := e.inputs[in]; st != nil {
		return st.deps
	}
	return nil
}

func (e *engine[I, O, S]) run() {
	defer e.shutdown()
	for {
		items := e.q.take(e.stop)
		if items == nil {
			return
		}
		e.process(items)
		clear(items) // drop references to the processed batches now
	}
}

// shutdown unregisters from every source and releases the output stores.
func (e *engine[I, O, S]) shutdown() {
	for _, src := range e.sources {
		src.remove()
	}
	e.store.close()
	if e.status != nil {
		e.status.close()
	}
}

// process handles one round: everything queued since the last round.
func (e *engine[I, O, S]) process(items []engineItem) {
	var markers []*source
	var requests []func()
	for _, it := range items {
		switch {
		case it.run != nil:
			requests = append(requests, it.run)
		case it.synced:
			markers = append(markers, it.src)
		case it.src == e.primary:
			it.src.ops.eventKeys(it.batch, e.markDirty)
		default:
			it.src.ops.collectDirty(e, it.src, it.batch, e.markDirty)
		}
	}
	slices.Sort(e.order)
	var statusChanges []change[ObjectWithStatus[I, S]]
	for _, k := range e.order {
		if sc, ok := e.recompute(k); ok {
			statusChanges = append(statusChanges, sc)
		}
	}
	e.resetScratch()
	e.flush()
	if e.status != nil {
		e.status.apply(statusChanges, false)
	}
	for _, src := range markers {
		src.synced = true
	}
	e.checkSynced()
	for _, f := range requests {
		f()
	}
}

func (e *engine[I, O, S]) markDirty(in string) {
	if _, ok := e.dirty[in]; !ok {
		e.dirty[in] = struct{}{}
		e.order = append(e.order, in)
	}
}

// checkSynced marks the outputs synced once every source has delivered its
// initial state and it has been processed.
func (e *engine[I, O, S]) checkSynced() {
	if e.synced {
		return
	}
	for _, src := range e.sources {
		if !src.synced {
			return
		}
	}
	e.synced = true
	if e.status != nil {
		e.status.markSynced()
	}
	e.store.markSynced()
}

// recompute runs the transformation for input k against the current state of
// the parent and records the outputs and dependencies. For a status
// collection it returns the status change.
func (e *engine[I, O, S]) recompute(k string) (change[ObjectWithStatus[I, S]], bool) {
	in := e.parent.get(k)
	st := e.inputs[k]
	if in == nil {
		if st != nil {
			e.setOutputs(k, st, nil)
			e.refile(k, st.deps, nil)
			delete(e.inputs, k)
		}
		return change[ObjectWithStatus[I, S]]{key: k}, e.status != nil
	}
	outs, status, ok := e.run1(k, in)
	if !ok {
		// The transformation panicked: keep this input's previous outputs,
		// dependencies and status. A new input keeps what it read before the
		// panic, so a change to that (or to the input) runs it again.
		if st == nil && len(e.ctx.deps) > 0 {
			st = &inputState{}
			st.deps = appendInline(st.depArr[:0], e.ctx.deps)
			e.refile(k, nil, st.deps)
			e.inputs[k] = st
		}
		return change[ObjectWithStatus[I, S]]{}, false
	}
	if st == nil {
		st = &inputState{}
	}
	if !depsEqual(st.deps, e.ctx.deps) {
		e.refile(k, st.deps, nil)
		st.deps = appendInline(st.depArr[:0], e.ctx.deps)
		e.refile(k, nil, st.deps)
	}
	e.setOutputs(k, st, outs)
	clear(outs)
	e.outBuf = outs[:0]
	if len(st.out) == 0 && len(st.deps) == 0 {
		delete(e.inputs, k)
	} else {
		e.inputs[k] = st
	}
	if e.status == nil {
		return change[ObjectWithStatus[I, S]]{}, false
	}
	if status == nil {
		return change[ObjectWithStatus[I, S]]{key: k}, true
	}
	return change[ObjectWithStatus[I, S]]{key: k, obj: &ObjectWithStatus[I, S]{Obj: *in, Status: *status}}, true
}

// run1 runs the transformation for input k. A panic is recovered and logged
// with the collection and the input's key, so one bad object cannot stop the
// control plane; ok is false then.
func (e *engine[I, O, S]) run1(k string, in *I) (outs []*O, status *S, ok bool) {
	e.ctx.deps = e.ctx.deps[:0]
	start := time.Now()
	defer func() {
		e.store.metrics.observeTransformation(time.Since(start))
		e.store.transformations.Add(1)
		if r := recover(); r != nil {
			e.store.metrics.panics.Inc()
			slog.Error("krt: transformation panicked; keeping the previous result for this input",
				"collection", e.store.name, "key", k, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			clear(e.outBuf)
			ok = false
		}
	}()
	outs, status = e.transform(&e.ctx, *in, e.outBuf[:0])
	return outs, status, true
}

// refile moves input k's dependencies from old to new in the sources' reverse
// indexes.
func (e *engine[I, O, S]) refile(k string, old, new []dependency) {
	for i := range old {
		old[i].src.rev.file(k, &old[i].f, -1)
	}
	for i := range new {
		new[i].src.rev.file(k, &new[i].f, 1)
	}
}

// setOutputs replaces input k's outputs with outs.
func (e *engine[I, O, S]) setOutputs(k string, st *inputState, outs []*O) {
	keys := e.keyBuf[:0]
	for _, v := range outs {
		ok := e.outKey(v)
		if ok == k {
			ok = k // share the input key's bytes
		}
		if j := slices.Index(keys, ok); j >= 0 {
			keys = slices.Delete(keys, j, j+1) // a later output with the same key wins
		}
		keys = append(keys, ok)
		e.claim(k, ok, v)
	}
	for _, old := range st.out {
		if !slices.Contains(keys, old) {
			e.release(k, old)
		}
	}
	st.out = appendInline(st.outArr[:0], keys)
	clear(keys)
	e.keyBuf = keys[:0]
}

// appendInline copies src into dst, which is a zero-length slice of an inline
// array: when src fits, no allocation is made. An empty src gives nil.
func appendInline[E any](dst, src []E) []E {
	switch {
	case len(src) == 0:
		return nil
	case len(src) <= cap(dst):
		return append(dst, src...)
	}
	return slices.Clone(src)
}

// appendPointers appends a pointer to each element of vals to out; the
// pointers share vals' backing array.
func appendPointers[O any](out []*O, vals []O) []*O {
	for i := range vals {
		out = append(out, &vals[i])
	}
	return out
}

// current returns output ok as of this round.
func (e *engine[I, O, S]) current(ok string) *O {
	if v, changed := e.pending[ok]; changed {
		return v
	}
	return e.store.objs[ok] // only this goroutine writes the store
}

func (e *engine[I, O, S]) setPending(ok string, v *O) {
	if _, seen := e.pending[ok]; !seen {
		e.pendOrd = append(e.pendOrd, ok)
	}
	e.pending[ok] = v
}

func (e *engine[I, O, S]) ownerOf(ok string) string {
	if o, ok2 := e.foreignOwner[ok]; ok2 {
		return o
	}
	return ok
}

func (e *engine[I, O, S]) setOwner(ok, in string) {
	if ok == in {
		delete(e.foreignOwner, ok)
	} else {
		e.foreignOwner[ok] = in
	}
}

// claim records that input in produces value v under output key ok.
func (e *engine[I, O, S]) claim(in, ok string, v *O) {
	if e.current(ok) == nil {
		e.setPending(ok, v)
		e.setOwner(ok, in)
		return
	}
	owner := e.ownerOf(ok)
	switch {
	case owner == in:
		e.setPending(ok, v)
	case in < owner:
		e.shadow(ok, owner, e.current(ok))
		e.setPending(ok, v)
		e.setOwner(ok, in)
	default:
		e.shadow(ok, in, v)
	}
}

func (e *engine[I, O, S]) shadow(ok, in string, v *O) {
	m := e.shadowed[ok]
	if m == nil {
		m = map[string]*O{}
		e.shadowed[ok] = m
	}
	m[in] = v
}

// release records that input in no longer produces output key ok.
func (e *engine[I, O, S]) release(in, ok string) {
	if e.current(ok) == nil || e.ownerOf(ok) != in {
		if m := e.shadowed[ok]; m != nil {
			delete(m, in)
			if len(m) == 0 {
				delete(e.shadowed, ok)
			}
		}
		return
	}
	m := e.shadowed[ok]
	if len(m) == 0 {
		e.setPending(ok, nil)
		delete(e.foreignOwner, ok)
		return
	}
	next := ""
	for cand := range m {
		if next == "" || cand < next {
			next = cand
		}
	}
	e.setPending(ok, m[next])
	e.setOwner(ok, next)
	delete(m, next)
	if len(m) == 0 {
		delete(e.shadowed, ok)
	}
}

// scratchKeep is the size up to which per-round scratch space is kept for the
// next round; larger (the initial sync of a big collection) is released.
const scratchKeep = 256

func (e *engine[I, O, S]) resetScratch() {
	if len(e.order) > scratchKeep {
		e.dirty, e.order = map[string]struct{}{}, nil
		return
	}
	clear(e.dirty)
	e.order = e.order[:0]
}

// flush writes this round's output changes to the store, sorted by key.
func (e *engine[I, O, S]) flush() {
	if len(e.pendOrd) == 0 {
		return
	}
	slices.Sort(e.pendOrd)
	changes := make([]change[O], len(e.pendOrd))
	for i, ok := range e.pendOrd {
		changes[i] = change[O]{key: ok, obj: e.pending[ok]}
	}
	if len(e.pendOrd) > scratchKeep {
		e.pending, e.pendOrd = map[string]*O{}, nil
	} else {
		clear(e.pending)
		e.pendOrd = e.pendOrd[:0]
	}
	e.store.apply(changes, false)
}
