// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package writer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/infermesh/infermesh/pkg/kube/apply"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

const (
	manager = "istio.io/inference-pool-controller"
	label   = "istio.io/inferencepool-name"
)

type (
	svcAC      = *corev1ac.ServiceApplyConfiguration
	svcDesired = Desired[svcAC]
)

func shadow(name, selector string) svcDesired {
	return svcDesired{Namespace: "ns", Name: name, Apply: corev1ac.Service(name, "ns").
		WithLabels(map[string]string{label: "pool"}).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP("None").
			WithSelector(map[string]string{"app": selector}).
			WithPorts(corev1ac.ServicePort().WithName("http-0").WithPort(54321).WithProtocol(corev1.ProtocolTCP)))}
}

// fixture is an OwnedWriter over a static desired collection and a fake
// clientset, with a leader flag and a count of syncs per key.
type fixture struct {
	client  *fake.Clientset
	desired krt.StaticCollection[svcDesired]
	live    krt.StaticCollection[*corev1.Service]
	rec     *record.FakeRecorder
	leader  atomic.Bool
	w       *OwnedWriter[*corev1.Service, svcAC]

	mu     sync.Mutex
	synced map[string]int // sync calls per key (leader checks included)
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f := &fixture{
		client:  fake.NewClientset(objs...),
		desired: krt.NewStaticCollection[svcDesired](nil, nil, krt.WithStop(stop)),
		live:    krt.NewStaticCollection[*corev1.Service](nil, nil, krt.WithStop(stop)),
		rec:     record.NewFakeRecorder(100),
		synced:  map[string]int{},
	}
	w, err := NewOwnedWriter(OwnedConfig[*corev1.Service, svcAC]{
		Name:    "test",
		Desired: f.desired,
		Live:    f.live,
		Owned: &apply.Owned[*corev1.Service, svcAC]{
			FieldManager: manager, OwnerLabel: label, Extract: corev1ac.ExtractService, Recorder: f.rec,
		},
		Client: func(ns string) apply.Client[*corev1.Service, svcAC] { return f.client.CoreV1().Services(ns) },
		IsLeader: func() bool {
			return f.leader.Load()
		},
		RateLimiter: fastLimiter,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	return f
}

// run runs one leadership term until the test ends or the returned stop is
// called; it counts every sync.
func (f *fixture) run(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		term{
			name: "test", limiter: fastLimiter(), synced: f.desired, register: f.w.register,
			sync: func(ctx context.Context, key string) (bool, error) {
				wrote, err := f.w.sync(ctx, key)
				f.mu.Lock()
				f.synced[key]++
				f.mu.Unlock()
				return wrote, err
			},
		}.run(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func (f *fixture) syncs(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced[key]
}

func writeActions(c *fake.Clientset) (n int) {
	for _, a := range c.Actions() {
		switch a.GetVerb() {
		case "patch", "update", "delete", "create":
			n++
		}
	}
	return n
}

func getSvc(c *fake.Clientset, name string) (*corev1.Service, error) {
	return c.CoreV1().Services("ns").Get(context.Background(), name, metav1.GetOptions{})
}

func TestNoWritesWhileNotLeader(t *testing.T) {
	f := newFixture(t)
	f.desired.UpdateObject(shadow("a", "x"))
	f.run(t)
	waitFor(t, "the key to be popped", func() bool { return f.syncs("ns/a") > 0 })
	if n := len(f.client.Actions()); n != 0 {
		t.Fatalf("%d API calls while not leader: %v", n, f.client.Actions())
	}
}

func TestWritesAfterBecomingLeader(t *testing.T) {
	f := newFixture(t)
	f.desired.UpdateObject(shadow("a", "x"))
	stop := f.run(t) // a term in which IsLeader is (still) false
	waitFor(t, "the key to be popped", func() bool { return f.syncs("ns/a") > 0 })
	stop()
	f.leader.Store(true)
	f.run(t) // the next term enqueues every current key
	waitFor(t, "the Service to be created", func() bool { _, err := getSvc(f.client, "a"); return err == nil })
	// Later changes of the desired object are applied too.
	f.desired.UpdateObject(shadow("a", "y"))
	waitFor(t, "the selector to follow", func() bool {
		s, err := getSvc(f.client, "a")
		return err == nil && s.Spec.Selector["app"] == "y"
	})
}

func TestDeleteOfDesiredDoesNotDeleteTheObject(t *testing.T) {
	f := newFixture(t)
	f.leader.Store(true)
	f.desired.UpdateObject(shadow("a", "x"))
	f.run(t)
	waitFor(t, "the Service to be created", func() bool { _, err := getSvc(f.client, "a"); return err == nil })
	before := f.syncs("ns/a")
	f.desired.DeleteObject("ns/a")
	waitFor(t, "the delete to be processed", func() bool { return f.syncs("ns/a") > before })
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "delete" {
			t.Fatalf("the writer deleted an object: %v", a)
		}
	}
	if _, err := getSvc(f.client, "a"); err != nil {
		t.Fatalf("the Service is gone: %v", err)
	}
}

func TestRequeueOnError(t *testing.T) {
	f := newFixture(t)
	f.leader.Store(true)
	var failures atomic.Int32
	f.client.PrependReactor("patch", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures.Add(1) <= 3 {
			return true, nil, apierrors.NewServiceUnavailable("try again")
		}
		return false, nil, nil
	})
	f.desired.UpdateObject(shadow("a", "x"))
	f.run(t)
	waitFor(t, "three failed syncs and a successful one", func() bool { return f.syncs("ns/a") >= 4 })
	if _, err := getSvc(f.client, "a"); err != nil {
		t.Fatalf("the Service was not created after the failures: %v", err)
	}
}

func TestNotOwnedIsLeftAloneAndNotRetried(t *testing.T) {
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Labels: map[string]string{"team": "x"}}}
	f := newFixture(t, theirs)
	var reported atomic.Int32
	f.w.cfg.OnNotOwned = func(d *svcDesired, err error) {
		if d.Name != "a" || !errors.Is(err, apply.ErrNotOwned) {
			t.Errorf("OnNotOwned(%s, %v), want a and ErrNotOwned", d.Name, err)
		}
		reported.Add(1)
	}
	f.leader.Store(true)
	f.desired.UpdateObject(shadow("a", "x"))
	f.desired.UpdateObject(shadow("b", "x")) // processed after a: a is done by then
	f.run(t)
	waitFor(t, "b to be synced", func() bool { return f.syncs("ns/b") > 0 })
	if got := f.syncs("ns/a"); got != 1 {
		t.Fatalf("someone else's object synced %d times, want once (no retries)", got)
	}
	live, err := getSvc(f.client, "a")
	if err != nil || live.Labels[label] != "" || live.Spec.Selector != nil {
		t.Fatalf("someone else's Service changed: %+v, %v", live, err)
	}
	if writeActions(f.client) != 2 { // the create of b and the apply that follows it
		t.Fatalf("writes = %v, want only b's create and apply", f.client.Actions())
	}
	if n := reported.Load(); n != 1 {
		t.Fatalf("OnNotOwned called %d times, want once", n)
	}
}

func TestLiveChangeRestoresDrift(t *testing.T) {
	f := newFixture(t)
	f.leader.Store(true)
	f.desired.UpdateObject(shadow("a", "x"))
	f.run(t)
	// Wait for the whole first sync (create, then the apply that follows it),
	// so the intruder's change lands after it.
	waitFor(t, "the Service to be created", func() bool { return f.syncs("ns/a") > 0 })
	intruder := corev1ac.Service("a", "ns").WithSpec(corev1ac.ServiceSpec().WithSelector(map[string]string{"app": "hijacked"}))
	hijacked, err := f.client.CoreV1().Services("ns").Apply(context.Background(), intruder,
		metav1.ApplyOptions{FieldManager: "kubectl", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	f.live.UpdateObject(hijacked) // what the informer would deliver
	waitFor(t, "the selector to be restored", func() bool {
		s, err := getSvc(f.client, "a")
		return err == nil && s.Spec.Selector["app"] == "x"
	})
	// The event is recorded just after the restoring apply returns.
	select {
	case e := <-f.rec.Events:
		if !strings.HasPrefix(e, "Warning FieldsChanged") {
			t.Fatalf("event %q", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no drift event")
	}
}

func TestOwnedConfigValidation(t *testing.T) {
	if _, err := NewOwnedWriter(OwnedConfig[*corev1.Service, svcAC]{}); err == nil {
		t.Fatal("empty config accepted")
	}
}

func TestForeignObjectDeletedThenOursIsCreated(t *testing.T) {
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Labels: map[string]string{"team": "x"}}}
	f := newFixture(t, theirs)
	f.leader.Store(true)
	f.live.UpdateObject(theirs)
	f.desired.UpdateObject(shadow("a", "x"))
	f.run(t)
	waitFor(t, "the key to be tried", func() bool { return f.syncs("ns/a") > 0 })
	if err := f.client.CoreV1().Services("ns").Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.live.DeleteObject("ns/a") // what the informer would deliver
	waitFor(t, "our Service to be created", func() bool {
		s, err := getSvc(f.client, "a")
		return err == nil && s.Labels[label] == "pool"
	})
}

// appliedBefore returns the Service ns/name as a previous leader left it,
// applied with our field manager, managedFields and all.
func appliedBefore(t *testing.T, d svcDesired) *corev1.Service {
	t.Helper()
	c := fake.NewClientset()
	o := &apply.Owned[*corev1.Service, svcAC]{FieldManager: manager, OwnerLabel: label, Extract: corev1ac.ExtractService}
	if _, err := o.Apply(context.Background(), c.CoreV1().Services(d.Namespace), d.Namespace, d.Name, d.Apply); err != nil {
		t.Fatal(err)
	}
	s, err := getSvc(c, d.Name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCachedUpToDateObjectCostsNoRequest(t *testing.T) {
	prev := appliedBefore(t, shadow("a", "x"))
	stripped := prev.DeepCopy()
	stripped.ManagedFields = nil
	for _, tc := range []struct {
		name   string
		cached *corev1.Service
		gets   int
	}{
		{"cached with our applied fields", prev, 0},
		{"cached without managedFields", stripped, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, prev.DeepCopy())
			f.leader.Store(true)
			f.live.UpdateObject(tc.cached)
			f.desired.UpdateObject(shadow("a", "x"))
			f.run(t)
			waitFor(t, "the key to be synced", func() bool { return f.syncs("ns/a") > 0 })
			gets := 0
			for _, a := range f.client.Actions() {
				if a.GetVerb() == "get" {
					gets++
				}
			}
			if gets != tc.gets || writeActions(f.client) != 0 {
				t.Fatalf("%d gets and %d writes, want %d and none: %v", gets, writeActions(f.client), tc.gets, f.client.Actions())
			}
		})
	}
}

func TestStaleCachedCopyWaitsForTheLiveEvent(t *testing.T) {
	prev := appliedBefore(t, shadow("a", "x"))
	f := newFixture(t, prev.DeepCopy())
	f.leader.Store(true)
	f.live.UpdateObject(prev) // the informer has not yet seen the intruder's change below
	intruder := corev1ac.Service("a", "ns").WithSpec(corev1ac.ServiceSpec().WithSelector(map[string]string{"app": "hijacked"}))
	hijacked, err := f.client.CoreV1().Services("ns").Apply(context.Background(), intruder,
		metav1.ApplyOptions{FieldManager: "kubectl", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	f.desired.UpdateObject(shadow("a", "x"))
	f.run(t)
	waitFor(t, "the key to be synced", func() bool { return f.syncs("ns/a") > 0 })
	f.live.UpdateObject(hijacked) // the informer catches up
	waitFor(t, "the selector to be restored", func() bool {
		s, err := getSvc(f.client, "a")
		return err == nil && s.Spec.Selector["app"] == "x"
	})
}
