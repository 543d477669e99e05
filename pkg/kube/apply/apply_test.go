// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

const (
	manager = "istio.io/inference-pool-controller"
	label   = "istio.io/inferencepool-name"
)

func shadow(selector string) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service("pool-ip-1234", "ns").
		WithLabels(map[string]string{label: "pool"}).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP("None").
			WithSelector(map[string]string{"app": selector}).
			WithPorts(corev1ac.ServicePort().WithName("http-0").WithPort(54321).WithProtocol(corev1.ProtocolTCP)))
}

func newOwned(rec record.EventRecorder) *Owned[*corev1.Service, *corev1ac.ServiceApplyConfiguration] {
	return &Owned[*corev1.Service, *corev1ac.ServiceApplyConfiguration]{
		FieldManager: manager, OwnerLabel: label, Extract: corev1ac.ExtractService, Recorder: rec,
	}
}

// writes counts the write actions (apply patches, updates, deletes) so far.
func writes(c *fake.Clientset) (n int) {
	for _, a := range c.Actions() {
		switch a.GetVerb() {
		case "patch", "update", "delete", "create":
			n++
		}
	}
	return n
}

func live(t *testing.T, c *fake.Clientset) *corev1.Service {
	t.Helper()
	return liveNamed(t, c, "pool-ip-1234")
}

func TestCreateThenNoWriteWhenUnchanged(t *testing.T) {
	c := fake.NewClientset()
	o := newOwned(nil)
	ctx := context.Background()
	if r, err := o.Apply(ctx, c.CoreV1().Services("ns"), "ns", "pool-ip-1234", shadow("a")); err != nil || r != Created {
		t.Fatalf("first apply: %v, %v", r, err)
	}
	n := writes(c)
	if r, err := o.Apply(ctx, c.CoreV1().Services("ns"), "ns", "pool-ip-1234", shadow("a")); err != nil || r != Unchanged {
		t.Fatalf("second apply: %v, %v", r, err)
	}
	if writes(c) != n {
		t.Fatal("an unchanged desired object was written again")
	}
	if r, err := o.Apply(ctx, c.CoreV1().Services("ns"), "ns", "pool-ip-1234", shadow("b")); err != nil || r != Updated {
		t.Fatalf("changed apply: %v, %v", r, err)
	}
	if got := live(t, c).Spec.Selector["app"]; got != "b" {
		t.Fatalf("selector = %q after update, want b", got)
	}
}

func TestNeverTouchesAnObjectWithoutOurLabel(t *testing.T) {
	theirs := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool-ip-1234", Labels: map[string]string{"team": "x"}},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.7"},
	}
	c := fake.NewClientset(theirs)
	r, err := newOwned(nil).Apply(context.Background(), c.CoreV1().Services("ns"), "ns", "pool-ip-1234", shadow("a"))
	if r != NotOwned || !errors.Is(err, ErrNotOwned) {
		t.Fatalf("apply over someone else's object: %v, %v; want NotOwned, ErrNotOwned", r, err)
	}
	if writes(c) != 0 {
		t.Fatalf("wrote to someone else's object: %v", c.Actions())
	}
	if got := live(t, c); got.Spec.ClusterIP != "10.96.0.7" || got.Labels["team"] != "x" || got.Labels[label] != "" {
		t.Fatalf("someone else's object changed: %+v", got)
	}
}

func TestDriftIsRestoredWithAWarning(t *testing.T) {
	c := fake.NewClientset()
	rec := record.NewFakeRecorder(10)
	o := newOwned(rec)
	ctx := context.Background()
	svcs := c.CoreV1().Services("ns")
	if _, err := o.Apply(ctx, svcs, "ns", "pool-ip-1234", shadow("a")); err != nil {
		t.Fatal(err)
	}
	// Another manager force-applies a change to a field we own.
	intruder := corev1ac.Service("pool-ip-1234", "ns").WithSpec(corev1ac.ServiceSpec().WithSelector(map[string]string{"app": "hijacked"}))
	if _, err := svcs.Apply(ctx, intruder, metav1.ApplyOptions{FieldManager: "kubectl", Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := live(t, c).Spec.Selector["app"]; got != "hijacked" {
		t.Fatalf("intruder's apply did not land (selector %q); the test is not testing drift", got)
	}
	r, err := o.Apply(ctx, svcs, "ns", "pool-ip-1234", shadow("a"))
	if err != nil || r != Restored {
		t.Fatalf("apply after drift: %v, %v; want Restored", r, err)
	}
	if got := live(t, c).Spec.Selector["app"]; got != "a" {
		t.Fatalf("selector = %q after restore, want a", got)
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Warning FieldsChanged") {
			t.Fatalf("event = %q", e)
		}
	default:
		t.Fatal("no drift event recorded")
	}
}

func TestImmutableFieldIsRecreated(t *testing.T) {
	c := fake.NewClientset()
	o := newOwned(nil)
	ctx := context.Background()
	svcs := c.CoreV1().Services("ns")
	if _, err := o.Apply(ctx, svcs, "ns", "pool-ip-1234", shadow("a")); err != nil {
		t.Fatal(err)
	}
	rejected := false
	c.PrependReactor("patch", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if rejected {
			return false, nil, nil
		}
		rejected = true
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "pool-ip-1234", field.ErrorList{
			field.Invalid(field.NewPath("spec", "clusterIP"), "None", "field is immutable"),
		})
	})
	var deletedWithUID bool
	c.PrependReactor("delete", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		deletedWithUID = d.GetDeleteOptions().Preconditions != nil && d.GetDeleteOptions().Preconditions.UID != nil
		return false, nil, nil
	})
	r, err := o.Apply(ctx, svcs, "ns", "pool-ip-1234", shadow("b"))
	if err != nil || r != Recreated {
		t.Fatalf("apply rejected for an immutable field: %v, %v; want Recreated", r, err)
	}
	if !deletedWithUID {
		t.Fatal("delete was not guarded by the live object's UID")
	}
	if got := live(t, c).Spec.Selector["app"]; got != "b" {
		t.Fatalf("selector = %q after recreate, want b", got)
	}
}

func TestOtherInvalidErrorsAreNotRecreated(t *testing.T) {
	c := fake.NewClientset()
	o := newOwned(nil)
	ctx := context.Background()
	svcs := c.CoreV1().Services("ns")
	if _, err := o.Apply(ctx, svcs, "ns", "pool-ip-1234", shadow("a")); err != nil {
		t.Fatal(err)
	}
	c.PrependReactor("patch", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "pool-ip-1234", field.ErrorList{
			field.Invalid(field.NewPath("spec", "ports"), 0, "must be between 1 and 65535"),
		})
	})
	deletes := 0
	c.PrependReactor("delete", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		deletes++
		return false, nil, nil
	})
	if _, err := o.Apply(ctx, svcs, "ns", "pool-ip-1234", shadow("b")); err == nil || !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want the wrapped Invalid error", err)
	}
	if deletes != 0 {
		t.Fatal("an object was deleted for an error recreating cannot fix")
	}
}

// A foreign object created between our read (not found) and our write must
// not be taken over: creation uses Create, which fails if the name exists.
func TestObjectAppearingAfterOurReadIsNotTakenOver(t *testing.T) {
	c := fake.NewClientset()
	theirs := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool-ip-1234", Labels: map[string]string{"team": "x"}},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"}},
	}
	first := true
	c.PrependReactor("get", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if first {
			first = false
			if err := c.Tracker().Add(theirs); err != nil {
				t.Error(err)
			}
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, "pool-ip-1234")
		}
		return false, nil, nil
	})
	if _, err := newOwned(nil).Apply(context.Background(), c.CoreV1().Services("ns"), "ns", "pool-ip-1234", shadow("a")); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("err = %v, want AlreadyExists", err)
	}
	got := live(t, c)
	if got.Labels[label] != "" || got.Spec.Selector["app"] != "theirs" {
		t.Fatalf("someone else's object was taken over: %+v", got)
	}
}

// An apply over a live object is guarded by the resourceVersion whose
// ownership label was checked: if the object changed in between, the write
// fails with a conflict instead of landing on an object we did not check.
func TestApplyIsGuardedByTheCheckedResourceVersion(t *testing.T) {
	c := fake.NewClientset()
	o := newOwned(nil)
	ctx := context.Background()
	svcs := c.CoreV1().Services("ns")
	if _, err := o.Apply(ctx, svcs, "ns", "pool-ip-1234", shadow("a")); err != nil {
		t.Fatal(err)
	}
	// The fake clientset keeps no resourceVersions; give the live object one.
	cur := live(t, c)
	cur.ResourceVersion = "42"
	if err := c.Tracker().Update(corev1.SchemeGroupVersion.WithResource("services"), cur, "ns"); err != nil {
		t.Fatal(err)
	}
	if live(t, c).ResourceVersion != "42" {
		t.Fatal("cannot set a resourceVersion in the fake; the test cannot check the guard")
	}
	var patches []string
	c.PrependReactor("patch", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patches = append(patches, string(a.(k8stesting.PatchAction).GetPatch()))
		return false, nil, nil
	})
	if _, err := o.Apply(ctx, svcs, "ns", "pool-ip-1234", shadow("b")); err != nil {
		t.Fatal(err)
	}
	if len(patches) != 1 || !strings.Contains(patches[0], `"resourceVersion":"42"`) {
		t.Fatalf("apply patches = %q, want one carrying the checked resourceVersion 42", patches)
	}
}

func TestUpToDateReadsOurAppliedFieldsOfTheCachedCopy(t *testing.T) {
	c := fake.NewClientset()
	ctx := context.Background()
	svcs := c.CoreV1().Services("ns")
	if _, err := newOwned(nil).Apply(ctx, svcs, "ns", "pool-ip-1234", shadow("a")); err != nil {
		t.Fatal(err)
	}
	cached := live(t, c)
	// A new Owned, as after a restart: nothing applied by it yet.
	rec := record.NewFakeRecorder(10)
	o := newOwned(rec)
	if o.UpToDate(cached, shadow("b")) {
		t.Error("up to date with another selector")
	}
	stripped := cached.DeepCopy()
	stripped.ManagedFields = nil
	if o.UpToDate(stripped, shadow("a")) {
		t.Error("up to date without our managedFields entry")
	}
	unlabelled := cached.DeepCopy()
	delete(unlabelled.Labels, label)
	if o.UpToDate(unlabelled, shadow("a")) {
		t.Error("up to date without our ownership label")
	}
	n := len(c.Actions())
	if !o.UpToDate(cached, shadow("a")) {
		t.Fatal("not up to date with what was applied")
	}
	if len(c.Actions()) != n {
		t.Fatalf("UpToDate made requests: %v", c.Actions()[n:])
	}
	// It remembers what is desired, as Apply does: a change by another
	// manager after it is drift.
	intruder := corev1ac.Service("pool-ip-1234", "ns").WithSpec(corev1ac.ServiceSpec().WithSelector(map[string]string{"app": "hijacked"}))
	if _, err := svcs.Apply(ctx, intruder, metav1.ApplyOptions{FieldManager: "kubectl", Force: true}); err != nil {
		t.Fatal(err)
	}
	if o.UpToDate(live(t, c), shadow("a")) {
		t.Error("up to date after another manager took our selector")
	}
	if r, err := o.Apply(ctx, svcs, "ns", "pool-ip-1234", shadow("a")); err != nil || r != Restored {
		t.Fatalf("apply after drift: %v, %v; want Restored", r, err)
	}
}
