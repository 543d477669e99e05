// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"fmt"
	"log/slog"
	"reflect"

	"k8s.io/client-go/tools/cache"
)

// NewInformer returns a collection of the objects of a client-go informer.
// T is the informer's object type, for example *corev1.Pod; keys are
// "namespace/name". The caller starts the informer (usually through its
// factory); the collection is synced once the informer has listed and
// delivered its initial objects. An object of another type is logged and
// ignored. Updates that keep the resourceVersion (resyncs) emit nothing.
func NewInformer[T any](inf cache.SharedIndexInformer, opts ...CollectionOption) Collection[T] {
	o := buildOptions("Informer["+typeName[T]()+"]", opts)
	ti := newTypeInfo[T]()
	ti.equal = informerEqual(ti.equal)
	s := newStore(o, ti, ti.mustKey())
	registerDebug(o.debugger, s)
	set := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		t, ok := obj.(T)
		if !ok {
			slog.Error("krt: informer delivered an object of an unexpected type",
				"collection", s.name, "want", ti.name, "got", fmt.Sprintf("%T", obj))
			return
		}
		c := change[T]{key: s.keyOf(&t), obj: &t}
		if deleted {
			c.obj = nil
		}
		s.apply([]change[T]{c}, false)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj, false) },
		UpdateFunc: func(_, obj any) { set(obj, false) },
		DeleteFunc: func(obj any) { set(obj, true) },
	})
	if err != nil {
		// AddEventHandler fails only once the informer has stopped.
		slog.Error("krt: cannot register on informer", "collection", s.name, "error", err)
		s.closeOnStop()
		return s
	}
	stop := o.stop
	if stop == nil {
		stop = make(chan struct{}) // never closes: the collection lives as long as the process
	}
	go func() {
		if cache.WaitForCacheSync(stop, reg.HasSynced) {
			s.markSynced()
		}
	}()
	go func() {
		<-stop
		_ = inf.RemoveEventHandler(reg)
		s.close()
	}()
	return s
}

// WrapClient is NewInformer over anything that exposes its informer, such as
// the typed informers of client-go's informer factories
// (factory.Core().V1().Pods()).
func WrapClient[T any](c interface {
	Informer() cache.SharedIndexInformer
}, opts ...CollectionOption) Collection[T] {
	return NewInformer[T](c.Informer(), opts...)
}

type resourceVersioned interface{ GetResourceVersion() string }

// informerEqual compares resourceVersions when both are set: the API server
// changes it on every write, so equal versions (a resync, a replayed event) are
// no change and different ones are. Objects without one (fake clients) are
// compared deeply.
func informerEqual[T any](deep func(a, b *T) bool) func(a, b *T) bool {
	var zt T
	if _, ok := any(zt).(resourceVersioned); !ok || reflect.TypeFor[T]().Kind() != reflect.Pointer {
		return deep
	}
	return func(a, b *T) bool {
		ra, rb := any(*a).(resourceVersioned).GetResourceVersion(), any(*b).(resourceVersioned).GetResourceVersion()
		if ra != "" && rb != "" {
			return ra == rb
		}
		return deep(a, b)
	}
}
