// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import "fmt"

// EventType says what happened to one object of a collection.
type EventType int

const (
	// EventAdd: the object is new; Event.New is set, Event.Old is nil.
	EventAdd EventType = iota
	// EventUpdate: the object changed; both Event.Old and Event.New are set.
	EventUpdate
	// EventDelete: the object is gone; Event.Old is set, Event.New is nil.
	EventDelete
)

func (e EventType) String() string {
	switch e {
	case EventAdd:
		return "add"
	case EventUpdate:
		return "update"
	case EventDelete:
		return "delete"
	}
	return fmt.Sprintf("EventType(%d)", int(e))
}

// Event is one change of one object. Old and New are never both nil. The
// pointers are shared with the collection and must not be modified.
type Event[T any] struct {
	// Old is the previous version, set on update and delete.
	Old *T
	// New is the current version, set on add and update.
	New *T
	// Event is the kind of change.
	Event EventType
}

// Latest returns New for an add or update, and Old for a delete.
func (e Event[T]) Latest() T {
	if e.New != nil {
		return *e.New
	}
	return *e.Old
}

// Items returns the versions the event carries: Old first, then New.
func (e Event[T]) Items() []T {
	res := make([]T, 0, 2)
	if e.Old != nil {
		res = append(res, *e.Old)
	}
	if e.New != nil {
		res = append(res, *e.New)
	}
	return res
}

// Syncer reports whether something has processed its initial state.
type Syncer interface {
	// HasSynced is true once the initial state is fully processed.
	HasSynced() bool
	// WaitUntilSynced blocks until HasSynced is true (returns true) or stop is
	// closed first (returns false).
	WaitUntilSynced(stop <-chan struct{}) bool
}

// HandlerRegistration is what Register and RegisterBatch return. It is synced
// once the handler has been called with the collection's initial state.
type HandlerRegistration interface {
	Syncer
	// UnregisterHandler stops delivery to the handler and releases its
	// goroutine. Safe to call more than once.
	UnregisterHandler()
}

// EventStream is the subscription half of a Collection.
type EventStream[T any] interface {
	Syncer
	// Register calls f once per event, in order, on a goroutine owned by the
	// registration. The current state is replayed first as adds. f may block;
	// that delays only this handler.
	Register(f func(o Event[T])) HandlerRegistration
	// RegisterBatch is Register with events delivered in batches. With
	// runExistingState the current state is replayed first as one batch of adds
	// (sorted by key); without it only later changes are delivered. Handlers
	// must not modify the slice or the objects.
	RegisterBatch(f func(o []Event[T]), runExistingState bool) HandlerRegistration
}

// Collection is a set of objects of one type, each with a unique string key,
// that can be read and subscribed to. Every collection in this package
// implements it; it cannot be implemented outside the package.
type Collection[T any] interface {
	// GetKey returns the object with key k, or nil. The object is shared: do
	// not modify it.
	GetKey(k string) *T
	// List returns every object, sorted by key.
	List() []T
	EventStream[T]

	base() *store[T]
}

// Singleton is a collection that holds at most one object.
type Singleton[T any] interface {
	// Get returns the object, or nil if there is none.
	Get() *T
	// Register calls f on every change of the object.
	Register(f func(o Event[T])) HandlerRegistration
	// AsCollection views the singleton as a Collection with at most one key.
	AsCollection() Collection[T]
}

// HandlerContext is handed to transformations; pass it to Fetch. It records
// what the transformation read.
type HandlerContext interface {
	_handlerContext()
}

// Transformations derive outputs from an input. They must be pure: read other
// collections only through Fetch/FetchOne with the given context.
type (
	// TransformationEmpty derives the value of a Singleton.
	TransformationEmpty[T any] func(ctx HandlerContext) *T
	// TransformationSingle derives at most one output (nil = none) per input.
	TransformationSingle[I, O any] func(ctx HandlerContext, i I) *O
	// TransformationMulti derives any number of outputs per input.
	TransformationMulti[I, O any] func(ctx HandlerContext, i I) []O
	// TransformationSingleStatus derives a status for the input (nil = none)
	// and at most one output.
	TransformationSingleStatus[I, S, O any] func(ctx HandlerContext, i I) (*S, *O)
	// TransformationMultiStatus derives a status for the input and any number
	// of outputs.
	TransformationMultiStatus[I, S, O any] func(ctx HandlerContext, i I) (*S, []O)
)

// ResourceNamer gives an object's key. Types without it need Kubernetes object
// metadata (GetName and GetNamespace); the key is then "namespace/name", or
// "name" for cluster-scoped objects.
type ResourceNamer interface {
	ResourceName() string
}

// Equaler lets a type decide when two versions are equal; an update whose
// output Equals the previous one emits no event.
type Equaler[T any] interface {
	Equals(other T) bool
}

// Labeler gives the labels used by FilterLabel.
type Labeler interface {
	GetLabels() map[string]string
}

// LabelSelectorer gives the selector used by FilterSelects and
// FilterSelectsNonEmpty (a Service's spec.selector, for example).
type LabelSelectorer interface {
	GetLabelSelector() map[string]string
}

// Namespacer gives the namespace used by FilterNamespace and NewNamespaceIndex.
type Namespacer interface {
	GetNamespace() string
}
