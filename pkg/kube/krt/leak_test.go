// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestStopReleasesPipelines builds 1,000 pipelines of every collection kind on
// long-lived inputs, stops them, and checks that goroutines and registrations
// on the inputs return to where they started.
func TestStopReleasesPipelines(t *testing.T) {
	inputsStop := make(chan struct{})
	defer close(inputsStop)
	pods := krt.NewStaticCollection(nil, []pod{
		{Name: "a", Namespace: "ns", Labels: labels("app", "x"), IP: "10.0.0.1"},
	}, krt.WithStop(inputsStop), krt.WithName("LeakPods"))
	svcs := krt.NewStaticCollection(nil, []service{{Name: "x", Namespace: "ns", Selector: labels("app", "x")}},
		krt.WithStop(inputsStop), krt.WithName("LeakServices"))
	debug := krt.NewDebugHandler()

	baseGoroutines := runtime.NumGoroutine()
	basePods, baseSvcs := krt.Stats(pods).Registrations, krt.Stats(svcs).Registrations

	const pipelines = 1000
	for i := range pipelines {
		stop := make(chan struct{})
		opts := []krt.CollectionOption{krt.WithStop(stop), krt.WithDebugging(debug), krt.WithName(fmt.Sprintf("leak-%d", i))}
		eps := endpointsOf(pods, svcs, stop)
		many := krt.NewManyCollection(eps, func(ctx krt.HandlerContext, e endpoints) []endpoints {
			return []endpoints{e}
		}, opts...)
		single := krt.NewSingleton(func(ctx krt.HandlerContext) *endpoints {
			return krt.FetchOne(ctx, many, krt.FilterKey("ns/x"))
		}, opts...)
		joined := krt.JoinCollection([]krt.Collection[pod]{pods, pods}, opts...)
		statuses, _ := krt.NewStatusCollection(svcs, func(ctx krt.HandlerContext, s service) (*int, *endpoints) {
			n := len(krt.Fetch(ctx, joined, krt.FilterLabel(s.Selector)))
			return &n, nil
		}, opts...)
		reg := statuses.Register(func(krt.Event[krt.ObjectWithStatus[service, int]]) {})
		single.Register(func(krt.Event[endpoints]) {})
		if !reg.WaitUntilSynced(stop) || !single.AsCollection().WaitUntilSynced(stop) {
			t.Fatal("pipeline did not sync")
		}
		if single.Get() == nil {
			t.Fatal("singleton has no value")
		}
		close(stop)
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		g := runtime.NumGoroutine()
		p, s := krt.Stats(pods).Registrations, krt.Stats(svcs).Registrations
		if g <= baseGoroutines && p == basePods && s == baseSvcs && len(debug.Dump()) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after stopping %d pipelines: goroutines %d (baseline %d), registrations on pods %d (baseline %d), "+
				"on services %d (baseline %d), collections left in the debug handler %d",
				pipelines, g, baseGoroutines, p, basePods, s, baseSvcs, len(debug.Dump()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
