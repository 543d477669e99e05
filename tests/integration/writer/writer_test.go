// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package writer_test runs pkg/kube/writer against a real cluster: drift
// repair with a real event, someone else's object left alone (checked in the
// audit log), and leader handover between two replicas.
package writer_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

// waitBound bounds every wait for the writer or the election to act.
const waitBound = 30 * time.Second

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, waitBound, what, cond)
}

func setup(t *testing.T, ns string, opts ...kubeenv.Option) (*kubeenv.Env, kubernetes.Interface) {
	env := kubeenv.Start(t, opts...)
	admin := kubernetes.NewForConfigOrDie(env.RESTConfig())
	if _, err := admin.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return env, admin
}

// ours reports whether the live Service carries exactly the desired fields
// under our field manager.
func ours(ctx context.Context, admin kubernetes.Interface, d svcDesired) bool {
	live, err := admin.CoreV1().Services(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	got, err := corev1ac.ExtractService(live, manager)
	return err == nil && equality.Semantic.DeepEqual(got, d.Apply)
}

// auditWrites returns the completed write requests to one object.
func auditWrites(t *testing.T, env *kubeenv.Env, resource, ns, name string) []kubeenv.AuditEvent {
	t.Helper()
	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var out []kubeenv.AuditEvent
	for _, e := range events {
		if e.Stage == "ResponseComplete" && e.IsWrite() && e.Resource == resource && e.Namespace == ns && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// TestOwnedDriftIsRestoredAndForeignObjectsLeftAlone: drift of an owned
// object is restored; an object of the same name we do not own is never
// written.
func TestOwnedDriftIsRestoredAndForeignObjectsLeftAlone(t *testing.T) {
	const ns, agent = "writer-drift", "infermesh-writer-a"
	env, admin := setup(t, ns)
	ctx := t.Context()

	// Someone else's Service with the name of one of our shadow Services.
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-b-ip", Labels: map[string]string{"team": "x"}},
		Spec: corev1.ServiceSpec{ClusterIP: "None", Selector: map[string]string{"app": "theirs"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	foreign, err := admin.CoreV1().Services(ns).Create(ctx, foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	a, b := shadow(ns, "pool-a-ip", "a"), shadow(ns, "pool-b-ip", "b")
	desired := krt.NewStaticCollection[svcDesired](nil, []svcDesired{a, b}, krt.WithStop(t.Context().Done()))
	startInstance(t, env, ns, agent, desired, nil)
	eventually(t, "our Service to be created", func() bool { return ours(ctx, admin, a) })
	eventually(t, "the writer to read the foreign Service", func() bool {
		events, err := env.AuditEvents()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.UserAgent == agent && e.Verb == "get" && e.Resource == "services" && e.Name == "pool-b-ip" {
				return true
			}
		}
		return false
	})

	// Another field manager force-applies a change to a field we own.
	intruder := corev1ac.Service("pool-a-ip", ns).WithSpec(corev1ac.ServiceSpec().WithSelector(map[string]string{"app": "hijacked"}))
	if _, err := admin.CoreV1().Services(ns).Apply(ctx, intruder, metav1.ApplyOptions{FieldManager: "intruder", Force: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the intruder's apply in the audit log", func() bool {
		for _, e := range auditWrites(t, env, "services", ns, "pool-a-ip") {
			if e.FieldManager == "intruder" && e.Code == 200 {
				return true
			}
		}
		return false
	})
	eventually(t, "our fields to be restored", func() bool { return ours(ctx, admin, a) })
	eventually(t, "a FieldsChanged Warning event on our Service", func() bool {
		events, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Reason == "FieldsChanged" && e.Type == corev1.EventTypeWarning &&
				e.InvolvedObject.Kind == "Service" && e.InvolvedObject.Name == "pool-a-ip" &&
				strings.Contains(e.Message, manager) {
				return true
			}
		}
		return false
	})
	// Exactly three writes of ours: the create, the apply that follows it
	// (apply.Owned creates with Create, so that an object appearing after
	// our read is never taken over, then applies), and the restore; no write
	// loop between our apply and the informer event it causes.
	var mine []string
	for _, e := range auditWrites(t, env, "services", ns, "pool-a-ip") {
		if e.UserAgent == agent {
			mine = append(mine, fmt.Sprintf("%s fieldManager=%s code=%d", e.Verb, e.FieldManager, e.Code))
			if e.FieldManager != manager {
				t.Errorf("our write used field manager %q, want %q", e.FieldManager, manager)
			}
		}
	}
	if len(mine) != 3 || !strings.HasPrefix(mine[0], "create ") || !strings.HasPrefix(mine[1], "patch ") || !strings.HasPrefix(mine[2], "patch ") {
		t.Errorf("our writes to our Service: %q; want the create, its apply, and the restore", mine)
	}

	// The foreign Service is exactly as it was, and the audit log shows no
	// write to it from our writer.
	live, err := admin.CoreV1().Services(ns).Get(ctx, "pool-b-ip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if live.ResourceVersion != foreign.ResourceVersion {
		t.Fatalf("foreign Service changed: resourceVersion %s -> %s", foreign.ResourceVersion, live.ResourceVersion)
	}
	for _, e := range auditWrites(t, env, "services", ns, "pool-b-ip") {
		if e.UserAgent == agent || e.FieldManager == manager {
			t.Fatalf("our writer wrote to the foreign Service: %+v", e)
		}
	}
}

// httpRouteCRD is the HTTPRoute CRD manifest of the sigs.k8s.io/gateway-api
// version in go.mod.
func httpRouteCRD(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/gateway-api: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard", "gateway.networking.k8s.io_httproutes.yaml")
}

// parent is one status.parents entry, in the form the API server stores it
// (group and kind defaulted), so that comparing it with the live entry does
// not see a difference that is only defaulting.
func parent(controller, gateway, reason string) gatewayv1.RouteParentStatus {
	group, kind := gatewayv1.Group(gatewayv1.GroupName), gatewayv1.Kind("Gateway")
	return gatewayv1.RouteParentStatus{
		ParentRef:      gatewayv1.ParentReference{Group: &group, Kind: &kind, Name: gatewayv1.ObjectName(gateway)},
		ControllerName: gatewayv1.GatewayController(controller),
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: reason,
			Message: "computed", LastTransitionTime: metav1.Now()}},
	}
}

// sameEntries compares parents entries without lastTransitionTime, which the
// merge keeps from the live entry while the condition status is unchanged.
func sameEntries(a, b []gatewayv1.RouteParentStatus) bool {
	strip := func(ps []gatewayv1.RouteParentStatus) []gatewayv1.RouteParentStatus {
		out := make([]gatewayv1.RouteParentStatus, len(ps))
		for i, p := range ps {
			p = *p.DeepCopy()
			for j := range p.Conditions {
				p.Conditions[j].LastTransitionTime = metav1.Time{}
			}
			out[i] = p
		}
		return out
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// TestOnlyTheLeaseHolderWrites: only the Lease holder writes, for an owned
// Service and for our entries of a shared HTTPRoute status.
func TestOnlyTheLeaseHolderWrites(t *testing.T) {
	const ns = "writer-election"
	env, admin := setup(t, ns, kubeenv.WithCRDs(httpRouteCRD(t)))
	gw := gatewayclient.NewForConfigOrDie(env.RESTConfig())
	ctx := t.Context()

	// The shared HTTPRoute, with an entry of another controller.
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{
			ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}, {Name: "other-gw"}},
		}},
	}
	route, err := gw.GatewayV1().HTTPRoutes(ns).Create(ctx, route, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	theirs := []gatewayv1.RouteParentStatus{parent("example.com/other", "other-gw", "Theirs")}
	route.Status.Parents = theirs
	if _, err := gw.GatewayV1().HTTPRoutes(ns).UpdateStatus(ctx, route, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	version := 1
	d := func() svcDesired { return shadow(ns, "pool-a-ip", fmt.Sprintf("v%d", version)) }
	rs := func() routeStatus {
		return routeStatus{Namespace: ns, Name: "r",
			Parents: []gatewayv1.RouteParentStatus{parent(ourController, "gw", fmt.Sprintf("V%d", version))}}
	}
	desired := krt.NewStaticCollection[svcDesired](nil, []svcDesired{d()}, krt.WithStop(t.Context().Done()))
	routes := krt.NewStaticCollection[routeStatus](nil, []routeStatus{rs()}, krt.WithStop(t.Context().Done()))
	next := func() {
		version++
		desired.UpdateObject(d())
		routes.UpdateObject(rs())
	}
	converged := func() bool {
		if !ours(ctx, admin, d()) {
			return false
		}
		live, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "r", metav1.GetOptions{})
		return err == nil && sameEntries(live.Status.Parents, append(append([]gatewayv1.RouteParentStatus{}, theirs...), rs().Parents...))
	}
	holder := func() string {
		l, err := admin.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	replicas := map[string]*instance{}
	for _, name := range []string{"infermesh-writer-a", "infermesh-writer-b"} {
		replicas[name] = startInstance(t, env, ns, name, desired, routes)
	}
	eventually(t, "a Lease holder", func() bool { return replicas[holder()] != nil })
	first := holder()
	eventually(t, "v1 written", converged)
	next()
	eventually(t, "v2 written", converged)

	// Graceful: the holder stops and releases; the other takes over and
	// converges to a desired state that changed while no one led.
	replicas[first].stop()
	next()
	second := ""
	eventually(t, "the other replica to take the Lease", func() bool {
		h := holder()
		if h != "" && h != first {
			second = h
			return true
		}
		return false
	})
	eventually(t, "v3 written by the new leader", converged)

	// The other controller adds an entry of its own; ours must not drop it.
	theirs = append(theirs, parent("example.com/other", "gw", "Theirs"))
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "r", metav1.GetOptions{})
		if err != nil {
			return err
		}
		// A well-behaved other controller: its entries, then everyone
		// else's as they are (the order our merge produces too).
		parents := append([]gatewayv1.RouteParentStatus{}, theirs...)
		for _, p := range live.Status.Parents {
			if p.ControllerName == ourController {
				parents = append(parents, p)
			}
		}
		live.Status.Parents = parents
		_, err = gw.GatewayV1().HTTPRoutes(ns).UpdateStatus(ctx, live, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// Crash: the new holder stops without releasing the Lease.
	replicas[second].crash()
	if h := holder(); h != second {
		t.Fatalf("after the crash the Lease is held by %q, want %q still (not released)", h, second)
	}
	next()
	crashed := time.Now()
	replicas[first] = startInstance(t, env, ns, first, desired, routes)
	eventually(t, "the restarted replica to take the expired Lease", func() bool { return holder() == first })
	takeover := time.Since(crashed)
	eventually(t, "v4 written by the restarted replica", converged)
	t.Logf("takeover after the crash: %v (LeaseDuration 2 s)", takeover.Round(time.Millisecond))

	// One successful write per desired version and object: nothing unchanged
	// is written again, and the replicas never write over each other.
	agents := map[string]bool{first: true, second: true}
	// The owned Service: one write per desired version, plus the apply that
	// follows the create of the first.
	if n := checkOnlyHolderWrote(t, env, ns, agents, "services", "pool-a-ip", ""); n != version+1 {
		t.Errorf("%d writes to the owned Service for %d desired versions, want one each plus the apply after the create", n, version)
	}
	if n := checkOnlyHolderWrote(t, env, ns, agents, "httproutes", "r", "status"); n != version {
		t.Errorf("%d status writes to the HTTPRoute for %d desired versions, want one each", n, version)
	}
}

// checkOnlyHolderWrote checks the audit log: every write by one of agents to
// the object (resource, name, subresource) came from the replica whose
// successful Lease write (acquire or renew) was the latest before it. It
// returns the number of successful writes.
func checkOnlyHolderWrote(t *testing.T, env *kubeenv.Env, ns string, agents map[string]bool, resource, name, sub string) (writes int) {
	t.Helper()
	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	leaseWriter := ""
	perAgent := map[string]int{}
	for _, e := range events {
		if e.Stage != "ResponseComplete" || !e.IsWrite() || e.Namespace != ns {
			continue
		}
		switch {
		case e.Resource == "leases" && e.Name == leaseName && e.Code/100 == 2:
			leaseWriter = e.UserAgent
		case e.Resource == resource && e.Name == name && e.Subresource == sub && agents[e.UserAgent]:
			if e.Code/100 == 2 {
				writes++
				perAgent[e.UserAgent]++
			}
			if e.UserAgent != leaseWriter {
				t.Errorf("write %s %s by %q at %v while the Lease was last written by %q",
					e.Verb, e.RequestURI, e.UserAgent, e.Received, leaseWriter)
			}
		}
	}
	t.Logf("successful writes to %s %s/%s per replica: %v", resource, name, sub, perAgent)
	if len(perAgent) < 2 {
		t.Errorf("writes from %v; want both replicas to have written while leading", perAgent)
	}
	return writes
}
