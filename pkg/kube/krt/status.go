// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

// ObjectWithStatus pairs an input object with the status a status collection
// computed for it. Its key is the key of Obj.
type ObjectWithStatus[I, S any] struct {
	Obj    I
	Status S
}

// NewStatusCollection derives, from each object of c, a status for that object
// (nil = none) and at most one output, in one transformation run. It returns
// the statuses (keyed like the inputs) and the outputs. This is the shape of a
// controller that both writes an object's status and derives other objects
// from it, for example an InferencePool's status and its shadow Service.
func NewStatusCollection[I, S, O any](c Collection[I], f TransformationSingleStatus[I, S, O], opts ...CollectionOption,
) (Collection[ObjectWithStatus[I, S]], Collection[O]) {
	return newStatusEngine(c, opts, func(ctx HandlerContext, in I, out []*O) ([]*O, *S) {
		st, o := f(ctx, in)
		if o != nil {
			out = append(out, o)
		}
		return out, st
	})
}

// NewStatusManyCollection is NewStatusCollection with any number of outputs
// per input.
func NewStatusManyCollection[I, S, O any](c Collection[I], f TransformationMultiStatus[I, S, O], opts ...CollectionOption,
) (Collection[ObjectWithStatus[I, S]], Collection[O]) {
	return newStatusEngine(c, opts, func(ctx HandlerContext, in I, out []*O) ([]*O, *S) {
		st, os := f(ctx, in)
		return appendPointers(out, os), st
	})
}

func newStatusEngine[I, S, O any](c Collection[I], opts []CollectionOption, transform func(HandlerContext, I, []*O) ([]*O, *S),
) (Collection[ObjectWithStatus[I, S]], Collection[O]) {
	e := newEngine[I, O, S](c, typeName[O](), opts, transform, nil)
	parentKey := c.base().keyOf
	iti, sti := c.base().ti, newTypeInfo[S]()
	ti := typeInfo[ObjectWithStatus[I, S]]{
		name: "Status[" + iti.name + "]",
		equal: func(a, b *ObjectWithStatus[I, S]) bool {
			return sti.equal(&a.Status, &b.Status) && iti.equal(&a.Obj, &b.Obj)
		},
	}
	o := buildOptions(typeName[O](), opts)
	o.name += "/status"
	e.status = newStore(o, ti, func(x *ObjectWithStatus[I, S]) string { return parentKey(&x.Obj) })
	registerDebug(o.debugger, e.status)
	e.start()
	return e.status, e.store
}
