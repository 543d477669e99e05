// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

// SingletonKey is the key under which a singleton holds its object when viewed
// through AsCollection.
const SingletonKey = "singleton"

type singleton[T any] struct{ *store[T] }

func (s singleton[T]) Get() *T                     { return s.get(SingletonKey) }
func (s singleton[T]) AsCollection() Collection[T] { return s.store }

// unit is the one input of a derived singleton.
type unit struct{}

// NewSingleton derives a single value (nil = none) from whatever f fetches.
// It recomputes when anything it fetched changes.
func NewSingleton[O any](f TransformationEmpty[O], opts ...CollectionOption) Singleton[O] {
	o := buildOptions("Singleton["+typeName[O]()+"]", opts)
	in := newStore(collectionOptions{name: o.name + "/input", stop: o.stop},
		typeInfo[unit]{name: "unit", equal: func(_, _ *unit) bool { return true }},
		func(*unit) string { return SingletonKey })
	in.apply([]change[unit]{{key: SingletonKey, obj: &unit{}}}, true)
	in.markSynced()
	in.closeOnStop()
	e := newEngine[unit, O, struct{}](in, o.name, opts, func(ctx HandlerContext, _ unit, out []*O) ([]*O, *struct{}) {
		if v := f(ctx); v != nil {
			out = append(out, v)
		}
		return out, nil
	}, func(*O) string { return SingletonKey })
	e.start()
	return singleton[O]{e.store}
}

// StaticSingleton is a singleton whose value the caller sets.
type StaticSingleton[T any] interface {
	Singleton[T]
	// Set replaces the value (nil clears it), emitting an event if it changed.
	Set(v *T)
	// MarkSynced marks the singleton synced, for one created unsynced.
	MarkSynced()
}

type staticSingleton[T any] struct{ singleton[T] }

// NewStatic returns a settable singleton holding initial (nil = empty). With
// startSynced false it stays unsynced until MarkSynced.
func NewStatic[T any](initial *T, startSynced bool, opts ...CollectionOption) StaticSingleton[T] {
	o := buildOptions("Static["+typeName[T]()+"]", opts)
	s := newStore(o, newTypeInfo[T](), func(*T) string { return SingletonKey })
	st := staticSingleton[T]{singleton[T]{s}}
	st.Set(initial)
	if startSynced {
		s.markSynced()
	}
	registerDebug(o.debugger, s)
	s.closeOnStop() // after registerDebug: close reads onClose
	return st
}

func (s staticSingleton[T]) Set(v *T) {
	if v != nil {
		c := *v
		v = &c
	}
	s.apply([]change[T]{{key: SingletonKey, obj: v}}, false)
}

func (s staticSingleton[T]) MarkSynced() { s.markSynced() }
