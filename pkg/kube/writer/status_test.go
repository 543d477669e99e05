// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package writer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/status"
)

const ourController = "istio.io/gateway-controller"

type routeStatus = DesiredStatus[gatewayv1.RouteParentStatus]

var routeParents = status.ParentAccess[gatewayv1.RouteParentStatus]{
	Controller: func(p *gatewayv1.RouteParentStatus) string { return string(p.ControllerName) },
	Key: func(p *gatewayv1.RouteParentStatus) string {
		ns := ""
		if p.ParentRef.Namespace != nil {
			ns = string(*p.ParentRef.Namespace)
		}
		return ns + "/" + string(p.ParentRef.Name)
	},
	Conditions: func(p *gatewayv1.RouteParentStatus) *[]metav1.Condition { return &p.Conditions },
}

func parent(controller, gateway, reason string) gatewayv1.RouteParentStatus {
	return gatewayv1.RouteParentStatus{
		ParentRef:      gatewayv1.ParentReference{Name: gatewayv1.ObjectName(gateway)},
		ControllerName: gatewayv1.GatewayController(controller),
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: reason,
			LastTransitionTime: metav1.Unix(1, 0)}},
	}
}

type statusFixture struct {
	client  *gatewayfake.Clientset
	desired krt.StaticCollection[routeStatus]
	leader  atomic.Bool
	w       *StatusWriter[*gatewayv1.HTTPRoute, gatewayv1.RouteParentStatus]

	mu     sync.Mutex
	synced map[string]int
}

func newStatusFixture(t *testing.T, objs ...runtime.Object) *statusFixture {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f := &statusFixture{
		client:  gatewayfake.NewSimpleClientset(objs...),
		desired: krt.NewStaticCollection[routeStatus](nil, nil, krt.WithStop(stop)),
		synced:  map[string]int{},
	}
	routes := func(ns string) interface {
		Get(context.Context, string, metav1.GetOptions) (*gatewayv1.HTTPRoute, error)
		UpdateStatus(context.Context, *gatewayv1.HTTPRoute, metav1.UpdateOptions) (*gatewayv1.HTTPRoute, error)
	} {
		return f.client.GatewayV1().HTTPRoutes(ns)
	}
	w, err := NewStatusWriter(StatusConfig[*gatewayv1.HTTPRoute, gatewayv1.RouteParentStatus]{
		Name:       "test",
		Desired:    f.desired,
		Controller: ourController,
		Access:     routeParents,
		Get: func(ctx context.Context, ns, name string) (*gatewayv1.HTTPRoute, error) {
			return routes(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Parents: func(r *gatewayv1.HTTPRoute) []gatewayv1.RouteParentStatus { return r.Status.Parents },
		WithParents: func(r *gatewayv1.HTTPRoute, p []gatewayv1.RouteParentStatus) *gatewayv1.HTTPRoute {
			r = r.DeepCopy()
			r.Status.Parents = p
			return r
		},
		UpdateStatus: func(ctx context.Context, r *gatewayv1.HTTPRoute) error {
			_, err := routes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
			return err
		},
		IsLeader:    func() bool { return f.leader.Load() },
		RateLimiter: fastLimiter,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		term{
			name: "test", limiter: fastLimiter(), synced: f.desired, register: w.register,
			sync: func(ctx context.Context, key string) (bool, error) {
				wrote, err := w.sync(ctx, key)
				f.mu.Lock()
				f.synced[key]++
				f.mu.Unlock()
				return wrote, err
			},
		}.run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *statusFixture) syncs(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced[key]
}

func (f *statusFixture) parents(t *testing.T) []gatewayv1.RouteParentStatus {
	t.Helper()
	r, err := f.client.GatewayV1().HTTPRoutes("ns").Get(context.Background(), "r", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Parents
}

func route(parents ...gatewayv1.RouteParentStatus) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"},
		Status:     gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: parents}},
	}
}

func statusWrites(c *gatewayfake.Clientset) (n int) {
	for _, a := range c.Actions() {
		if a.GetVerb() == "update" || a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

func TestStatusNoWritesWhileNotLeader(t *testing.T) {
	f := newStatusFixture(t, route())
	f.desired.UpdateObject(routeStatus{Namespace: "ns", Name: "r",
		Parents: []gatewayv1.RouteParentStatus{parent(ourController, "gw", "Accepted")}})
	waitFor(t, "the key to be popped", func() bool { return f.syncs("ns/r") > 0 })
	if n := len(f.client.Actions()); n != 0 {
		t.Fatalf("%d API calls while not leader", n)
	}
}

func TestStatusKeepsOthersEntriesAndRemovesOursWhenNotDesired(t *testing.T) {
	theirs := parent("example.com/other", "gw", "Theirs")
	f := newStatusFixture(t, route(theirs))
	f.leader.Store(true)
	ourEntry := parent(ourController, "gw", "Accepted")
	f.desired.UpdateObject(routeStatus{Namespace: "ns", Name: "r", Parents: []gatewayv1.RouteParentStatus{ourEntry}})
	waitFor(t, "our entry to be written", func() bool { return len(f.parents(t)) == 2 })
	if got := f.parents(t); got[0].ControllerName != theirs.ControllerName || got[1].ControllerName != ourController {
		t.Fatalf("parents = %+v, want theirs then ours", got)
	}
	// The same desired status again: no write.
	n, before := statusWrites(f.client), f.syncs("ns/r")
	f.desired.UpdateObject(routeStatus{Namespace: "ns", Name: "r", Parents: []gatewayv1.RouteParentStatus{ourEntry}})
	waitFor(t, "the unchanged status to be processed", func() bool { return f.syncs("ns/r") > before })
	if statusWrites(f.client) != n {
		t.Fatal("an unchanged status was written")
	}
	// Desired gone: our entry goes, theirs stays.
	f.desired.DeleteObject("ns/r")
	waitFor(t, "our entry to be removed", func() bool { return len(f.parents(t)) == 1 })
	if got := f.parents(t); got[0].ControllerName != theirs.ControllerName {
		t.Fatalf("parents = %+v, want only theirs", got)
	}
}

func TestStatusRequeueOnError(t *testing.T) {
	f := newStatusFixture(t, route())
	f.leader.Store(true)
	var failures atomic.Int32
	f.client.PrependReactor("update", "httproutes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if failures.Add(1) <= 2 {
			return true, nil, apierrors.NewServiceUnavailable("httproutes down")
		}
		return false, nil, nil
	})
	f.desired.UpdateObject(routeStatus{Namespace: "ns", Name: "r",
		Parents: []gatewayv1.RouteParentStatus{parent(ourController, "gw", "Accepted")}})
	waitFor(t, "two failures and a success", func() bool { return f.syncs("ns/r") >= 3 })
	if len(f.parents(t)) != 1 {
		t.Fatalf("parents = %+v after the retries", f.parents(t))
	}
}

// A desired condition with a zero lastTransitionTime is written with the
// time of the write; rewriting an unchanged status keeps that time and writes
// nothing.
func TestStatusStampsZeroTransitionTimes(t *testing.T) {
	f := newStatusFixture(t, route())
	p := parent(ourController, "gw", "Accepted")
	p.Conditions[0].LastTransitionTime = metav1.Time{}
	f.desired.UpdateObject(routeStatus{Namespace: "ns", Name: "r", Parents: []gatewayv1.RouteParentStatus{p}})
	f.leader.Store(true)
	before := time.Now().Add(-time.Second)
	waitFor(t, "our entry written", func() bool { return len(f.parents(t)) == 1 })
	got := f.parents(t)[0].Conditions[0].LastTransitionTime
	if got.Time.Before(before) {
		t.Fatalf("lastTransitionTime = %v, want the time of the write", got)
	}
	writes := statusWrites(f.client)
	f.desired.UpdateObject(routeStatus{Namespace: "ns", Name: "r", Parents: []gatewayv1.RouteParentStatus{p}})
	waitFor(t, "second sync", func() bool { return f.syncs("ns/r") >= 2 })
	if n := statusWrites(f.client); n != writes {
		t.Errorf("%d writes after an unchanged recompute, want %d", n, writes)
	}
	if again := f.parents(t)[0].Conditions[0].LastTransitionTime; !again.Equal(&got) {
		t.Errorf("lastTransitionTime moved from %v to %v", got, again)
	}
}

// An entry of ours on an object that is no longer desired (it stopped being
// desired while no replica led) is removed at the start of the next term:
// the live state is replayed and objects carrying our entries are enqueued.
func TestStatusNewTermRemovesStaleEntries(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	r := route(parent("example.com/other", "gw", "Theirs"), parent(ourController, "gw2", "Accepted"))
	client := gatewayfake.NewSimpleClientset(r)
	desired := krt.NewStaticCollection[routeStatus](nil, nil, krt.WithStop(stop))
	live := krt.NewStaticCollection[*gatewayv1.HTTPRoute](nil, []*gatewayv1.HTTPRoute{r}, krt.WithStop(stop))
	w, err := NewStatusWriter(StatusConfig[*gatewayv1.HTTPRoute, gatewayv1.RouteParentStatus]{
		Name: "test", Desired: desired, Live: live, Controller: ourController, Access: routeParents,
		Get: func(ctx context.Context, ns, name string) (*gatewayv1.HTTPRoute, error) {
			return client.GatewayV1().HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Parents: func(r *gatewayv1.HTTPRoute) []gatewayv1.RouteParentStatus { return r.Status.Parents },
		WithParents: func(r *gatewayv1.HTTPRoute, p []gatewayv1.RouteParentStatus) *gatewayv1.HTTPRoute {
			r = r.DeepCopy()
			r.Status.Parents = p
			return r
		},
		UpdateStatus: func(ctx context.Context, r *gatewayv1.HTTPRoute) error {
			_, err := client.GatewayV1().HTTPRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
			return err
		},
		IsLeader: func() bool { return true }, RateLimiter: fastLimiter,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "our stale entry removed, theirs kept", func() bool {
		got, err := client.GatewayV1().HTTPRoutes("ns").Get(context.Background(), "r", metav1.GetOptions{})
		return err == nil && len(got.Status.Parents) == 1 && got.Status.Parents[0].ControllerName == "example.com/other"
	})
}
