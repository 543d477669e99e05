// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"fmt"
	"log/slog"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// optionalSource is what a Client keeps of each optional collection.
type optionalSource interface {
	// start starts watching the CRD. Idempotent.
	start()
	// waitUntilSynced is the collection's WaitUntilSynced.
	waitUntilSynced(stop <-chan struct{}) bool
}

// optionalCollection is a collection over a CRD that may be absent, and may be
// installed or removed while we run.
//
// It is a krt.StaticCollection fed by the handlers of an informer that runs
// only while the CRD is present: a small informer watches the one CRD object;
// when it is Established and serves the version we read, the object informer
// starts and fills the collection; when it goes away (or stops serving that
// version) the object informer stops and the collection is emptied in one
// batch. The collection is synced once the CRD informer has synced and either
// the CRD was absent or the object informer's initial list has arrived.
//
// Every run of the object informer has its own stop channel; handlers check
// under mu that their run is the current one, so a stopped informer's late
// events never reach the collection.
type optionalCollection[T any] struct {
	client      *Client
	name        string
	kind        crdKind
	newInformer func() cache.SharedIndexInformer
	// convert turns an informer object into the collection's item; false
	// drops it (the object is deleted from the collection). It must log why.
	convert func(obj any) (T, bool)

	col    krt.StaticCollection[T]
	synced *krt.ManualSyncer

	startOnce sync.Once

	mu        sync.Mutex
	crdSynced bool
	run       *optionalRun // nil while the CRD is absent
}

type optionalRun struct {
	stop chan struct{}
	once sync.Once
}

func (r *optionalRun) end() { r.once.Do(func() { close(r.stop) }) }

// newOptional builds an optional collection and files it with the Client.
// Call with c.mu held (from memo).
func newOptional[T any](c *Client, name string, kind crdKind, newInformer func() cache.SharedIndexInformer,
	convert func(obj any) (T, bool)) *optionalCollection[T] {
	o := &optionalCollection[T]{
		client:      c,
		name:        name,
		kind:        kind,
		newInformer: newInformer,
		convert:     convert,
		synced:      krt.NewManualSyncer(),
	}
	o.col = krt.NewStaticCollection[T](o.synced, nil, c.collectionOptions(name)...)
	c.optionals = append(c.optionals, o)
	return o
}

func (o *optionalCollection[T]) waitUntilSynced(stop <-chan struct{}) bool {
	return o.col.WaitUntilSynced(stop)
}

func (o *optionalCollection[T]) start() {
	o.startOnce.Do(func() {
		inf := newCRDInformer(o.client.dynamic, o.kind.name())
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.onCRD(obj, false) },
			UpdateFunc: func(_, obj any) { o.onCRD(obj, false) },
			DeleteFunc: func(obj any) { o.onCRD(obj, true) },
		})
		if err != nil { // only on a stopped informer; this one is new
			slog.Error("kube: cannot watch CRD", "crd", o.kind.name(), "error", err)
			return
		}
		stop := o.client.stop
		o.client.goRun(
			func() { inf.Run(stop) },
			func() {
				if cache.WaitForCacheSync(stop, reg.HasSynced) {
					o.onCRDSynced()
				}
			},
		)
	})
}

// onCRD follows the CRD: present (Established, serving our version) starts
// the object informer, absent stops it.
func (o *optionalCollection[T]) onCRD(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	st, ok := obj.(*crdState)
	if !ok || st.Name != o.kind.name() { // fakes ignore the field selector
		return
	}
	present := !deleted && st.serves(o.kind.version)
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case present && o.run == nil:
		slog.Info("kube: CRD present, starting informer", "collection", o.name, "crd", o.kind.name())
		o.startRunLocked()
	case !present && o.run != nil:
		slog.Info("kube: CRD gone, stopping informer", "collection", o.name, "crd", o.kind.name())
		o.run.end()
		o.run = nil
		o.col.Reset(nil)
		if o.crdSynced {
			o.synced.MarkSynced()
		}
	}
}

func (o *optionalCollection[T]) onCRDSynced() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.crdSynced = true
	if o.run == nil {
		o.synced.MarkSynced()
	}
}

func (o *optionalCollection[T]) startRunLocked() {
	run := &optionalRun{stop: make(chan struct{})}
	inf := o.newInformer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { o.apply(run, obj, false) },
		UpdateFunc: func(old, cur any) {
			if !sameResourceVersion(old, cur) {
				o.apply(run, cur, false)
			}
		},
		DeleteFunc: func(obj any) { o.apply(run, obj, true) },
	})
	if err != nil { // only on a stopped informer; this one is new
		slog.Error("kube: cannot register on informer", "collection", o.name, "error", err)
		return
	}
	stop := o.client.stop
	if !o.client.goRun(
		func() { inf.Run(run.stop) },
		func() {
			select {
			case <-stop:
				run.end()
			case <-run.stop:
			}
		},
		func() {
			if cache.WaitForCacheSync(run.stop, reg.HasSynced) {
				o.onRunSynced(run)
			}
		},
	) {
		return // the Client has ended
	}
	o.run = run
}

func (o *optionalCollection[T]) onRunSynced(run *optionalRun) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.run == run {
		o.synced.MarkSynced()
	}
}

// apply writes one informer event of run into the collection, unless run has
// been stopped meanwhile.
func (o *optionalCollection[T]) apply(run *optionalRun, obj any, deleted bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.run != run {
		return
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		slog.Error("kube: object without a key", "collection", o.name, "type", fmt.Sprintf("%T", obj), "error", err)
		return
	}
	if deleted {
		o.col.DeleteObject(key)
		return
	}
	item, ok := o.convert(obj)
	if !ok {
		o.col.DeleteObject(key)
		return
	}
	o.col.ConditionalUpdateObject(item)
}

// sameResourceVersion is true for a resync: both versions carry the same
// non-empty resourceVersion.
func sameResourceVersion(a, b any) bool {
	ma, okA := a.(metav1.Object)
	mb, okB := b.(metav1.Object)
	return okA && okB && ma.GetResourceVersion() != "" && ma.GetResourceVersion() == mb.GetResourceVersion()
}

// typedConvert is the convert function of typed informers: the object is the
// item.
func typedConvert[T any](collection string) func(obj any) (T, bool) {
	return func(obj any) (T, bool) {
		t, ok := obj.(T)
		if !ok {
			slog.Error("kube: informer delivered an object of an unexpected type",
				"collection", collection, "got", fmt.Sprintf("%T", obj))
		}
		return t, ok
	}
}
