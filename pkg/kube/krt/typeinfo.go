// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"fmt"
	"reflect"

	"google.golang.org/protobuf/proto"
)

// typeInfo holds the per-type functions a collection needs, resolved once at
// construction so the hot paths do no reflection. Every function takes a
// pointer to the stored value, so calling an interface method never boxes a
// struct.
type typeInfo[T any] struct {
	name      string
	key       func(*T) string // nil when T has no key (only singletons allow that)
	equal     func(a, b *T) bool
	labels    func(*T) map[string]string // nil when T has no labels
	selector  func(*T) map[string]string // nil when T has no selector
	namespace func(*T) string            // nil when T has no namespace
}

type kubeNamed interface {
	GetName() string
	GetNamespace() string
}

// typeName returns a readable name of T for messages and default collection
// names.
func typeName[T any]() string {
	return reflect.TypeFor[T]().String()
}

func newTypeInfo[T any]() typeInfo[T] {
	return typeInfo[T]{
		name:      typeName[T](),
		key:       keyFuncFor[T](),
		equal:     equalFuncFor[T](),
		labels:    mapGetterFor[T, Labeler](func(l Labeler) map[string]string { return l.GetLabels() }),
		selector:  mapGetterFor[T, LabelSelectorer](func(l LabelSelectorer) map[string]string { return l.GetLabelSelector() }),
		namespace: namespaceFuncFor[T](),
	}
}

// mustKey panics, naming T, when T has no key function. It is called by
// constructors of collections whose objects are addressed by key.
func (ti typeInfo[T]) mustKey() func(*T) string {
	if ti.key == nil {
		panic(fmt.Sprintf("krt: cannot derive a key for type %s: implement ResourceName() string, "+
			"or GetName() and GetNamespace() (Kubernetes object metadata)", ti.name))
	}
	return ti.key
}

// GetKey returns the key of o as collections of its type compute it: its
// ResourceName, else "namespace/name" (or "name" when the namespace is empty)
// from Kubernetes object metadata. It panics, naming the type, when T has
// neither.
func GetKey[T any](o T) string {
	return newTypeInfo[T]().mustKey()(&o)
}

func keyFuncFor[T any]() func(*T) string {
	var zp *T
	var zt T
	if _, ok := any(zp).(ResourceNamer); ok {
		return func(p *T) string { return any(p).(ResourceNamer).ResourceName() }
	}
	if _, ok := any(zt).(ResourceNamer); ok {
		return func(p *T) string { return any(*p).(ResourceNamer).ResourceName() }
	}
	if _, ok := any(zp).(kubeNamed); ok {
		return func(p *T) string { return namespacedKey(any(p).(kubeNamed)) }
	}
	if _, ok := any(zt).(kubeNamed); ok {
		return func(p *T) string { return namespacedKey(any(*p).(kubeNamed)) }
	}
	return nil
}

func namespacedKey(o kubeNamed) string {
	ns := o.GetNamespace()
	if ns == "" {
		return o.GetName()
	}
	return ns + "/" + o.GetName()
}

func equalFuncFor[T any]() func(a, b *T) bool {
	var zp *T
	var zt T
	if _, ok := any(zp).(Equaler[T]); ok {
		return func(a, b *T) bool { return any(a).(Equaler[T]).Equals(*b) }
	}
	if _, ok := any(zt).(Equaler[T]); ok {
		return func(a, b *T) bool { return any(*a).(Equaler[T]).Equals(*b) }
	}
	if _, ok := any(zt).(proto.Message); ok {
		return func(a, b *T) bool { return proto.Equal(any(*a).(proto.Message), any(*b).(proto.Message)) }
	}
	// reflect.DeepEqual on the two pointers compares the values they point to
	// without copying them into interfaces.
	return func(a, b *T) bool { return a == b || reflect.DeepEqual(a, b) }
}

func mapGetterFor[T any, I any](get func(I) map[string]string) func(*T) map[string]string {
	var zp *T
	var zt T
	if _, ok := any(zp).(I); ok {
		return func(p *T) map[string]string { return get(any(p).(I)) }
	}
	if _, ok := any(zt).(I); ok {
		return func(p *T) map[string]string { return get(any(*p).(I)) }
	}
	return nil
}

func namespaceFuncFor[T any]() func(*T) string {
	var zp *T
	var zt T
	if _, ok := any(zp).(Namespacer); ok {
		return func(p *T) string { return any(p).(Namespacer).GetNamespace() }
	}
	if _, ok := any(zt).(Namespacer); ok {
		return func(p *T) string { return any(*p).(Namespacer).GetNamespace() }
	}
	return nil
}
