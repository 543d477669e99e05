// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// ErrNotOwned means an object with the desired name exists without our
// ownership label; it was left untouched.
var ErrNotOwned = errors.New("an object with this name exists and is not owned by infermesh")

// Object is what a live object must offer: Kubernetes metadata, and being a
// runtime.Object for events.
type Object interface {
	metav1.Object
	runtime.Object
}

// Client is the part of a client-go typed client (for example
// kubernetes.Interface.CoreV1().Services(ns)) that Apply uses.
type Client[O Object, AC any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (O, error)
	Create(ctx context.Context, obj O, opts metav1.CreateOptions) (O, error)
	Apply(ctx context.Context, ac AC, opts metav1.ApplyOptions) (O, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Result says what Apply did.
type Result int

const (
	// Unchanged: the live object already had our desired fields; no write.
	Unchanged Result = iota
	// Created: the object did not exist.
	Created
	// Updated: our desired state changed and was applied.
	Updated
	// Restored: another manager had changed our fields; they were applied
	// back and a Warning event recorded.
	Restored
	// Recreated: an immutable field had to change; deleted and created.
	Recreated
	// NotOwned: someone else's object has the name; nothing was written.
	NotOwned
)

func (r Result) String() string {
	return [...]string{"unchanged", "created", "updated", "restored", "recreated", "not-owned"}[r]
}

// Owned applies objects of one kind that infermesh owns.
type Owned[O Object, AC any] struct {
	// FieldManager is our server-side apply field manager, for example
	// istio.io/inference-pool-controller.
	FieldManager string
	// OwnerLabel marks objects we own (its presence, any value).
	OwnerLabel string
	// Extract returns the apply configuration of the fields manager owns on
	// live: client-go's generated Extract function of the kind (for Services
	// corev1ac.ExtractService).
	Extract func(live O, manager string) (AC, error)
	// Recorder receives the drift Warning events; nil records none.
	Recorder record.EventRecorder

	mu   sync.Mutex
	last map[string]AC // namespace/name -> what we last applied
}

// Apply makes the object namespace/name match desired, following the rules in
// the package documentation. desired must carry the name, the namespace and
// the ownership label. Errors from the API server are returned wrapped with
// the object's key; ErrNotOwned is returned (with Result NotOwned) for an
// object that is not ours.
func (o *Owned[O, AC]) Apply(ctx context.Context, c Client[O, AC], namespace, name string, desired AC) (Result, error) {
	key := namespace + "/" + name
	opts := metav1.ApplyOptions{FieldManager: o.FieldManager, Force: true}
	live, err := c.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if err := o.create(ctx, c, desired); err != nil {
			return Created, fmt.Errorf("create %s: %w", key, err)
		}
		o.remember(key, desired)
		return Created, nil
	case err != nil:
		return Unchanged, fmt.Errorf("read %s: %w", key, err)
	}
	if _, ours := live.GetLabels()[o.OwnerLabel]; !ours {
		return NotOwned, fmt.Errorf("%s: %w (it has no %s label)", key, ErrNotOwned, o.OwnerLabel)
	}
	current, err := o.Extract(live, o.FieldManager)
	if err != nil {
		return Unchanged, fmt.Errorf("read our fields of %s: %w", key, err)
	}
	if equality.Semantic.DeepEqual(current, desired) {
		o.remember(key, desired)
		return Unchanged, nil
	}
	result := Updated
	if last, ok := o.lastApplied(key); ok && equality.Semantic.DeepEqual(last, desired) {
		result = Restored
	}
	guarded, err := withResourceVersion(desired, live.GetResourceVersion())
	if err != nil {
		return result, fmt.Errorf("apply %s: %w", key, err)
	}
	if _, err := c.Apply(ctx, guarded, opts); err != nil {
		if !isImmutableFieldError(err) {
			return result, fmt.Errorf("apply %s: %w", key, err)
		}
		rv, uid := live.GetResourceVersion(), live.GetUID()
		pre := &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}
		if err := c.Delete(ctx, name, metav1.DeleteOptions{Preconditions: pre}); err != nil && !apierrors.IsNotFound(err) {
			return Recreated, fmt.Errorf("delete %s to change an immutable field: %w", key, err)
		}
		if err := o.create(ctx, c, desired); err != nil {
			return Recreated, fmt.Errorf("recreate %s: %w", key, err)
		}
		result = Recreated
	}
	if result == Restored && o.Recorder != nil {
		o.Recorder.Eventf(live, corev1.EventTypeWarning, "FieldsChanged",
			"fields owned by %s were changed by another writer; restored them", o.FieldManager)
	}
	o.remember(key, desired)
	return result, nil
}

// UpToDate reports whether cached, a copy of the live object that may be
// stale (an informer's), carries in our field manager's server-side apply
// entry exactly desired: then Apply would find the same and write nothing,
// so a caller may skip it and the read it starts with. Since desired
// carries the ownership label, that also says the copy is ours; a copy
// without our Apply entry (an informer that strips managedFields) is never
// up to date, and the caller applies as usual. It remembers desired as
// Apply does on Unchanged, so later drift is still told apart from our own
// changes. A stale copy can only delay a write until the newer version
// reaches the cache, whose event the caller must act on
// (writer.OwnedWriter's Live).
func (o *Owned[O, AC]) UpToDate(cached O, desired AC) bool {
	current, err := o.Extract(cached, o.FieldManager)
	if err != nil || !equality.Semantic.DeepEqual(current, desired) {
		return false
	}
	o.remember(cached.GetNamespace()+"/"+cached.GetName(), desired)
	return true
}

// create creates the object from its apply configuration, then applies the
// same configuration over the new version. Create fails with AlreadyExists if
// someone else created the name after our read, so such an object is never
// taken over. The apply that follows (guarded by the created
// resourceVersion) makes our fields owned through an Apply operation, which
// is what Extract reads; without it the next Apply would see a difference.
func (o *Owned[O, AC]) create(ctx context.Context, c Client[O, AC], desired AC) error {
	obj := reflect.New(reflect.TypeFor[O]().Elem()).Interface().(O)
	if err := convert(desired, obj); err != nil {
		return err
	}
	created, err := c.Create(ctx, obj, metav1.CreateOptions{FieldManager: o.FieldManager})
	if err != nil {
		return err
	}
	guarded, err := withResourceVersion(desired, created.GetResourceVersion())
	if err != nil {
		return err
	}
	_, err = c.Apply(ctx, guarded, metav1.ApplyOptions{FieldManager: o.FieldManager, Force: true})
	return err
}

// withResourceVersion returns a copy of ac whose metadata.resourceVersion is
// rv: server-side apply then succeeds only if the object is still the version
// whose ownership label we checked.
func withResourceVersion[AC any](ac AC, rv string) (AC, error) {
	var m map[string]any
	if err := convert(ac, &m); err != nil {
		return ac, err
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	meta["resourceVersion"] = rv
	out := reflect.New(reflect.TypeFor[AC]().Elem()).Interface().(AC)
	err := convert(m, out)
	return out, err
}

// convert copies in into out through JSON: apply configurations and objects
// of one kind share their JSON form.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode %T: %w", in, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode into %T: %w", out, err)
	}
	return nil
}

// Forget drops what Apply remembers of namespace/name, for an object that is
// no longer desired.
func (o *Owned[O, AC]) Forget(namespace, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.last, namespace+"/"+name)
}

func (o *Owned[O, AC]) remember(key string, ac AC) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		o.last = map[string]AC{}
	}
	o.last[key] = ac
}

func (o *Owned[O, AC]) lastApplied(key string) (AC, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ac, ok := o.last[key]
	return ac, ok
}

// isImmutableFieldError reports whether err is the API server's rejection of
// a change to an immutable field (422 Invalid with a "field is immutable"
// cause), as opposed to any other invalid value, which recreating would not
// fix.
func isImmutableFieldError(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if strings.Contains(c.Message, "immutable") {
			return true
		}
	}
	return false
}
