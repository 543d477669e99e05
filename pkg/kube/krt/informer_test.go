// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// capturingInformer is a real shared informer that also hands the test the
// handler krt registered, so the test can deliver what an informer delivers in
// rarer situations (tombstones, resyncs, objects of another type) directly.
type capturingInformer struct {
	cache.SharedIndexInformer
	mu      sync.Mutex
	handler cache.ResourceEventHandler
	reg     cache.ResourceEventHandlerRegistration
	removed []cache.ResourceEventHandlerRegistration
}

func (c *capturingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := c.SharedIndexInformer.AddEventHandler(h)
	c.mu.Lock()
	c.handler, c.reg = h, reg
	c.mu.Unlock()
	return reg, err
}

func (c *capturingInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	c.mu.Lock()
	c.removed = append(c.removed, reg)
	c.mu.Unlock()
	return c.SharedIndexInformer.RemoveEventHandler(reg)
}

func (c *capturingInformer) h() cache.ResourceEventHandler {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handler
}

// informerEnv is a fake clientset with a started informer factory.
type informerEnv struct {
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	stop    chan struct{}
}

func newInformerEnv(t *testing.T, objs ...*corev1.Pod) *informerEnv {
	t.Helper()
	client := fake.NewClientset()
	for _, p := range objs {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env := &informerEnv{client: client, factory: informers.NewSharedInformerFactory(client, 0), stop: make(chan struct{})}
	t.Cleanup(func() {
		close(env.stop)
		env.factory.Shutdown()
	})
	return env
}

func kpod(name, rv string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv, Labels: lbls}}
}

func TestInformerFollowsPods(t *testing.T) {
	ctx := context.Background()
	env := newInformerEnv(t, kpod("a", "1", nil))
	pods := krt.WrapClient[*corev1.Pod](env.factory.Core().V1().Pods(), krt.WithStop(env.stop))
	if pods.HasSynced() {
		t.Fatal("synced before the factory started")
	}
	env.factory.Start(env.stop)
	waitSynced(t, pods)
	if got := keysOf(pods.List()); len(got) != 1 || got[0] != "ns/a" {
		t.Fatalf("after sync: keys %v, want [ns/a]", got)
	}
	r := record(t, pods)

	podsAPI := env.client.CoreV1().Pods("ns")
	if _, err := podsAPI.Create(ctx, kpod("b", "2", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := podsAPI.Update(ctx, kpod("a", "3", labels("app", "x")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := podsAPI.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got := r.wait(t, 4)
	checkEventShapes(t, got)
	type ev struct {
		typ krt.EventType
		key string
	}
	want := []ev{{krt.EventAdd, "ns/a"}, {krt.EventAdd, "ns/b"}, {krt.EventUpdate, "ns/a"}, {krt.EventDelete, "ns/b"}}
	for i, e := range got {
		if i >= len(want) || e.Event != want[i].typ || krt.GetKey(e.Latest()) != want[i].key {
			t.Fatalf("events %v, want %v", describeEvents(got), want)
		}
	}
	if p := pods.GetKey("ns/a"); p == nil || (*p).Labels["app"] != "x" {
		t.Errorf("ns/a after update = %v", p)
	}
}

func describeEvents(es []krt.Event[*corev1.Pod]) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Event.String() + " " + krt.GetKey(e.Latest())
	}
	return out
}

func TestInformerDeliveries(t *testing.T) {
	env := newInformerEnv(t)
	inf := &capturingInformer{SharedIndexInformer: env.factory.Core().V1().Pods().Informer()}
	pods := krt.NewInformer[*corev1.Pod](inf, krt.WithStop(env.stop))
	env.factory.Start(env.stop)
	waitSynced(t, pods)
	h := inf.h()
	r := record(t, pods)

	a1 := kpod("a", "1", labels("app", "x"))
	h.OnAdd(a1, false)

	// A resync: the same resourceVersion, even with other contents, is no
	// change.
	resynced := a1.DeepCopy()
	resynced.Labels = labels("app", "changed-without-a-new-version")
	h.OnUpdate(a1, a1)
	h.OnUpdate(a1, resynced)

	// Objects of an unexpected type are ignored, also inside tombstones.
	h.OnAdd(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"}}, false)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}})
	if got := pods.GetKey("ns/svc"); got != nil {
		t.Errorf("an object of another type was stored: %v", got)
	}

	a2 := kpod("a", "2", labels("app", "y"))
	h.OnUpdate(a1, a2)
	// A tombstone: the informer missed the delete and only knows the last
	// state.
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: a2})

	got := r.wait(t, 3)
	checkEventShapes(t, got)
	if seq := describeEvents(got); len(seq) != 3 || seq[0] != "add ns/a" || seq[1] != "update ns/a" || seq[2] != "delete ns/a" {
		t.Fatalf("events = %v, want [add ns/a, update ns/a, delete ns/a]", seq)
	}
	if got[1].New == nil || (*got[1].New).ResourceVersion != "2" || got[1].Old == nil || (*got[1].Old).ResourceVersion != "1" {
		t.Errorf("update event carries old RV %v, new RV %v; want 1 -> 2", got[1].Old, got[1].New)
	}
	if got := pods.GetKey("ns/a"); got != nil {
		t.Errorf("ns/a after tombstone = %v, want gone", got)
	}
	if n := krt.Stats(pods).Size; n != 0 {
		t.Errorf("size = %d, want 0", n)
	}
}

func TestInformerStopReleasesHandler(t *testing.T) {
	env := newInformerEnv(t, kpod("a", "1", nil))
	inf := &capturingInformer{SharedIndexInformer: env.factory.Core().V1().Pods().Informer()}
	stop := make(chan struct{})
	pods := krt.NewInformer[*corev1.Pod](inf, krt.WithStop(stop))
	env.factory.Start(env.stop)
	waitSynced(t, pods)
	r := record(t, pods)
	r.wait(t, 1)

	close(stop)
	eventually(t, "the informer handler to be removed", func() bool {
		inf.mu.Lock()
		defer inf.mu.Unlock()
		return len(inf.removed) == 1 && inf.removed[0] == inf.reg
	})
	eventually(t, "handlers on the collection released", func() bool { return krt.Stats(pods).Registrations == 0 })
}
