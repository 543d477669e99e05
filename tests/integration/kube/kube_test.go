// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package kube_test runs pkg/kube's Client and its krt collections against a
// real control plane (pkg/test/kubeenv).
package kube_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// waitBound bounds every wait for a controller or an informer to react. The
// latency itself is a benchmark figure, not something these tests assert.
const waitBound = 30 * time.Second

// restartBound bounds waits right after an apiserver restart: client-go's
// reflectors reconnect with a backoff that is capped at 30 s.
const restartBound = 60 * time.Second

// newClient builds a pkg/kube Client on env, starts it, and ends it with the
// test.
func newClient(t *testing.T, env *kubeenv.Env) *kube.Client {
	t.Helper()
	c, err := kube.NewFromRESTConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// startAndSync starts the Client and waits (bounded) until it and every given
// collection have synced.
func startAndSync(t *testing.T, c *kube.Client, syncers ...krt.Syncer) {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	c.Start(stop)
	bounded := make(chan struct{})
	timer := time.AfterFunc(waitBound, func() { close(bounded) })
	defer timer.Stop()
	if !c.WaitForCacheSync(bounded) {
		t.Fatalf("the Client's informers did not sync within %v", waitBound)
	}
	for i, s := range syncers {
		if !s.WaitUntilSynced(bounded) {
			t.Fatalf("collection %d did not sync within %v", i, waitBound)
		}
	}
}

// eventually polls cond every 50 ms until it holds or bound passes, then fails
// the test with describe's view of the last state.
func eventually(t *testing.T, bound time.Duration, what string, cond func() bool, describe func() string) {
	t.Helper()
	began := time.Now()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, bound, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("%s: not reached within %v: %s", what, bound, describe())
	}
	t.Logf("%s after %v", what, time.Since(began).Round(time.Millisecond))
}

func createNamespace(t *testing.T, c *kube.Client, ns string) {
	t.Helper()
	if _, err := c.Kube().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func newService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// ServiceEndpoints is a derived object: the sorted ready addresses of one
// Service's EndpointSlices.
type ServiceEndpoints struct {
	Namespace, Name string
	Ready           []string
}

func (s ServiceEndpoints) ResourceName() string { return s.Namespace + "/" + s.Name }

// serviceEndpoints derives, per Service, the ready addresses of its
// EndpointSlices, fetched by namespace and the kubernetes.io/service-name
// label, so a change to a slice recomputes only its Service.
func serviceEndpoints(c *kube.Client) krt.Collection[ServiceEndpoints] {
	epSlices := c.EndpointSlices()
	return krt.NewCollection(c.Services(), func(ctx krt.HandlerContext, svc *corev1.Service) *ServiceEndpoints {
		eps := krt.Fetch(ctx, epSlices,
			krt.FilterNamespace(svc.Namespace),
			krt.FilterLabel(map[string]string{discoveryv1.LabelServiceName: svc.Name}))
		out := &ServiceEndpoints{Namespace: svc.Namespace, Name: svc.Name, Ready: []string{}}
		for _, s := range eps {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					out.Ready = append(out.Ready, ep.Addresses...)
				}
			}
		}
		slices.Sort(out.Ready)
		return out
	}, krt.WithName("ServiceEndpoints"))
}

// TestEndpointSliceCollectionFollowsReadiness: a Service and three pods made
// ready by the kubelet stand-in; a krt collection derived from the Client's
// EndpointSlices shows their three addresses, and follows when one pod loses
// readiness.
func TestEndpointSliceCollectionFollowsReadiness(t *testing.T) {
	env := kubeenv.Start(t)
	c := newClient(t, env)
	eps := serviceEndpoints(c)
	startAndSync(t, c, eps)
	ctx := t.Context()

	const ns, svc = "eps-test", "echo"
	createNamespace(t, c, ns)
	if _, err := c.Kube().CoreV1().Services(ns).Create(ctx, newService(ns, svc), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ips := []string{"10.244.0.13", "10.244.0.14", "10.244.0.15"}
	pods, err := kubeenv.CreateReadyPods(ctx, c.Kube(), ns, "echo", map[string]string{"app": svc}, 8080, ips...)
	if err != nil {
		t.Fatal(err)
	}

	key := ns + "/" + svc
	ready := func() []string {
		if got := eps.GetKey(key); got != nil {
			return got.Ready
		}
		return nil
	}
	waitReady := func(want []string) {
		t.Helper()
		eventually(t, waitBound, fmt.Sprintf("ServiceEndpoints[%s] shows ready %v", key, want),
			func() bool { return cmp.Equal(ready(), want) },
			func() string { return fmt.Sprintf("ready %v, want %v", ready(), want) })
	}
	waitReady(ips)

	if _, err := kubeenv.SetPodReady(ctx, c.Kube(), pods[0], ips[0], false); err != nil {
		t.Fatal(err)
	}
	waitReady(ips[1:])
}

// Named is a derived object that only carries a key.
type Named struct{ Key string }

func (n Named) ResourceName() string { return n.Key }

// eventLedger checks that a handler's event stream is consistent: no add of a
// key it holds, no update or delete of a key it does not.
type eventLedger struct {
	mu       sync.Mutex
	keys     map[string]bool
	adds     map[string]int
	deletes  map[string]int
	problems []string
}

func newEventLedger() *eventLedger {
	return &eventLedger{keys: map[string]bool{}, adds: map[string]int{}, deletes: map[string]int{}}
}

func (l *eventLedger) handle(ev krt.Event[Named]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := ev.Latest().Key
	switch ev.Event {
	case krt.EventAdd:
		if l.keys[k] {
			l.problems = append(l.problems, "add of present key "+k)
		}
		l.keys[k] = true
		l.adds[k]++
	case krt.EventUpdate:
		if !l.keys[k] {
			l.problems = append(l.problems, "update of absent key "+k)
		}
	case krt.EventDelete:
		if !l.keys[k] {
			l.problems = append(l.problems, "delete of absent key "+k)
		}
		delete(l.keys, k)
		l.deletes[k]++
	}
}

func (l *eventLedger) sortedKeys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k := range l.keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func keysOf(c krt.Collection[Named]) []string {
	var out []string
	for _, n := range c.List() {
		out = append(out, n.Key)
	}
	return out
}

// TestCollectionsSurviveAPIServerOutage kills kube-apiserver for 5 s under a
// running Client and collections derived from a required type (Services) and
// an optional one (InferencePools, CRD installed). Writes need the apiserver,
// so "an object created during the outage" is read as: created (and another
// deleted) right after the restart, while the Client's reflectors are still
// disconnected (they reconnect with backoff, typically 0.5 to 4 s later here),
// so the change reaches the Client only through the relist or resumed watch of
// the reconnection. Each derived collection must end with exactly the expected
// keys, and a handler's event stream must stay consistent: no add of a present
// key, no delete of an absent one, one add per object.
func TestCollectionsSurviveAPIServerOutage(t *testing.T) {
	poolCRD, err := kubeenv.InferencePoolCRD()
	if err != nil {
		t.Fatal(err)
	}
	env := kubeenv.Start(t, kubeenv.WithCRDs(poolCRD))
	c := newClient(t, env)
	ctx := t.Context()
	const ns = "outage-test"
	services := krt.NewCollection(c.Services(), func(_ krt.HandlerContext, svc *corev1.Service) *Named {
		if svc.Namespace != ns {
			return nil
		}
		return &Named{Key: svc.Namespace + "/" + svc.Name}
	}, krt.WithName("OutageServices"))
	pools := krt.NewCollection(c.InferencePools(), func(_ krt.HandlerContext, p *inferencev1.InferencePool) *Named {
		return &Named{Key: p.Namespace + "/" + p.Name}
	}, krt.WithName("OutagePools"))
	svcLedger, poolLedger := newEventLedger(), newEventLedger()
	svcReg := services.Register(svcLedger.handle)
	defer svcReg.UnregisterHandler()
	poolReg := pools.Register(poolLedger.handle)
	defer poolReg.UnregisterHandler()

	createService := func(name string) {
		t.Helper()
		if _, err := c.Kube().CoreV1().Services(ns).Create(ctx, newService(ns, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createPool := func(name string) {
		t.Helper()
		pool := &inferencev1.InferencePool{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: inferencev1.InferencePoolSpec{
				Selector:          inferencev1.LabelSelector{MatchLabels: map[inferencev1.LabelKey]inferencev1.LabelValue{"app": inferencev1.LabelValue(name)}},
				TargetPorts:       []inferencev1.Port{{Number: 8000}},
				EndpointPickerRef: &inferencev1.EndpointPickerRef{Name: inferencev1.ObjectName(name + "-epp"), Port: &inferencev1.Port{Number: 9002}},
			},
		}
		if _, err := c.Inference().InferenceV1().InferencePools(ns).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitKeys := func(bound time.Duration, what string, col krt.Collection[Named], ledger *eventLedger, want ...string) {
		t.Helper()
		for i := range want {
			want[i] = ns + "/" + want[i]
		}
		slices.Sort(want)
		eventually(t, bound, fmt.Sprintf("%s: collection and handler hold %v", what, want),
			func() bool { return cmp.Equal(keysOf(col), want) && cmp.Equal(ledger.sortedKeys(), want) },
			func() string { return fmt.Sprintf("collection %v, handler %v", keysOf(col), ledger.sortedKeys()) })
	}

	createNamespace(t, c, ns)
	for _, name := range []string{"before-0", "before-1", "before-2"} {
		createService(name)
	}
	createPool("pool-before")
	startAndSync(t, c, services, svcReg, pools, poolReg)
	waitKeys(waitBound, "services", services, svcLedger, "before-0", "before-1", "before-2")
	waitKeys(waitBound, "pools", pools, poolLedger, "pool-before")

	env.StopAPIServer()
	time.Sleep(5 * time.Second) // the outage itself, not a wait for a condition
	env.StartAPIServer()

	// Right after the restart, before the reflectors have reconnected.
	createService("during")
	if err := c.Kube().CoreV1().Services(ns).Delete(ctx, "before-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createPool("pool-during")
	waitKeys(restartBound, "services", services, svcLedger, "before-1", "before-2", "during")
	waitKeys(restartBound, "pools", pools, poolLedger, "pool-before", "pool-during")

	// The watches are live again: later creates arrive too.
	createService("after")
	createPool("pool-after")
	waitKeys(waitBound, "services", services, svcLedger, "before-1", "before-2", "during", "after")
	waitKeys(waitBound, "pools", pools, poolLedger, "pool-before", "pool-during", "pool-after")

	check := func(what string, ledger *eventLedger, wantAdds, wantDeletes map[string]int) {
		t.Helper()
		ledger.mu.Lock()
		defer ledger.mu.Unlock()
		if len(ledger.problems) > 0 {
			t.Errorf("%s: inconsistent event stream: %v", what, ledger.problems)
		}
		if diff := cmp.Diff(wantAdds, ledger.adds); diff != "" {
			t.Errorf("%s: adds per key (-want +got):\n%s", what, diff)
		}
		if diff := cmp.Diff(wantDeletes, ledger.deletes); diff != "" {
			t.Errorf("%s: deletes per key (-want +got):\n%s", what, diff)
		}
	}
	check("services", svcLedger,
		map[string]int{ns + "/before-0": 1, ns + "/before-1": 1, ns + "/before-2": 1, ns + "/during": 1, ns + "/after": 1},
		map[string]int{ns + "/before-0": 1})
	check("pools", poolLedger,
		map[string]int{ns + "/pool-before": 1, ns + "/pool-during": 1, ns + "/pool-after": 1},
		map[string]int{})
}

// TestInferencePoolsWaitForTheirCRD: a Client started on a cluster without the
// InferencePool CRD has a synced, empty InferencePools collection; once the CRD
// is installed, a new InferencePool shows up in it.
func TestInferencePoolsWaitForTheirCRD(t *testing.T) {
	env := kubeenv.Start(t) // no CRDs
	c := newClient(t, env)
	pools := c.InferencePools()
	startAndSync(t, c, pools)
	if got := pools.List(); len(got) != 0 {
		t.Fatalf("InferencePools without the CRD: %d objects, want none", len(got))
	}

	crd, err := kubeenv.InferencePoolCRD()
	if err != nil {
		t.Fatal(err)
	}
	env.ApplyCRDs(crd)

	ns, name := seed.Namespace, seed.PoolName
	createNamespace(t, c, ns)
	pool := seed.InferencePool()
	// The apiserver may take a moment to serve a just-established CRD's
	// resource: retry the create within the bound.
	var created *inferencev1.InferencePool
	var firstErr error
	eventually(t, waitBound, "InferencePool created", func() bool {
		created, err = c.Inference().InferenceV1().InferencePools(ns).Create(t.Context(), pool, metav1.CreateOptions{})
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return err == nil
	}, func() string { return fmt.Sprint(err) })
	if firstErr != nil {
		t.Logf("the first create failed: %v", firstErr)
	}

	key := ns + "/" + name
	eventually(t, waitBound, "InferencePools shows "+key,
		func() bool { return pools.GetKey(key) != nil },
		func() string { return fmt.Sprintf("%d objects", len(pools.List())) })
	got := pools.GetKey(key)
	if got == nil || (*got).ResourceVersion != created.ResourceVersion {
		t.Fatalf("InferencePools[%s] is not the created object", key)
	}
	if diff := cmp.Diff(created.Spec, (*got).Spec); diff != "" {
		t.Errorf("spec in the collection (-created +got):\n%s", diff)
	}
	if len((*got).ManagedFields) != 0 {
		t.Errorf("managedFields not stripped: %d entries", len((*got).ManagedFields))
	}
	if g := (*got).Spec.EndpointPickerRef; g == nil || g.Name != "vllm-llama3-8b-epp" || g.Port == nil || g.Port.Number != 9002 ||
		g.FailureMode != inferencev1.EndpointPickerFailOpen {
		t.Errorf("endpointPickerRef %+v", g)
	}
}

// TestStandardCRDsServeTheClient: kubeenv.WithStandardCRDs installs the
// Gateway API standard channel and the InferencePool CRD from the modules'
// manifests, so every Gateway API and inference collection of the Client
// syncs, and a Gateway API object round-trips into its collection.
func TestStandardCRDsServeTheClient(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	c := newClient(t, env)
	classes := c.GatewayClasses()
	startAndSync(t, c, classes, c.Gateways(), c.HTTPRoutes(), c.ReferenceGrants(),
		c.GRPCRoutes(), c.BackendTLSPolicies(), c.InferencePools())

	gc := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "infermesh"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: "infermesh.io/gateway-controller"},
	}
	if _, err := c.GatewayAPI().GatewayV1().GatewayClasses().Create(t.Context(), gc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitBound, "GatewayClasses shows infermesh",
		func() bool { return classes.GetKey("infermesh") != nil },
		func() string { return fmt.Sprintf("%d objects", len(classes.List())) })
}
