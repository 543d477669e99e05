// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

// eventually waits up to 10 s for cond; asynchrony is real here (every
// collection has its own goroutine).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, cond)
}

func endpointsOf(pods krt.StaticCollection[pod], svcs krt.StaticCollection[service], stop chan struct{}) krt.Collection[endpoints] {
	byNS := krt.NewNamespaceIndex(pods)
	return krt.NewCollection(svcs, func(ctx krt.HandlerContext, s service) *endpoints {
		ps := byNS.Fetch(ctx, s.Namespace, krt.FilterLabel(s.Selector))
		ips := make([]string, 0, len(ps))
		for _, p := range ps {
			ips = append(ips, p.IP)
		}
		slices.Sort(ips)
		return &endpoints{Name: s.Name, Namespace: s.Namespace, IPs: ips}
	}, krt.WithStop(stop), krt.WithName("Endpoints"))
}

func TestCollectionFollowsInputs(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	pods := krt.NewStaticCollection(nil, []pod{
		{Name: "a", Namespace: "ns", Labels: labels("app", "x"), IP: "10.0.0.1"},
		{Name: "b", Namespace: "ns", Labels: labels("app", "y"), IP: "10.0.0.2"},
		{Name: "c", Namespace: "other", Labels: labels("app", "x"), IP: "10.0.0.3"},
	}, krt.WithStop(stop))
	svcs := krt.NewStaticCollection(nil, []service{{Name: "x", Namespace: "ns", Selector: labels("app", "x")}}, krt.WithStop(stop))
	eps := endpointsOf(pods, svcs, stop)
	if !eps.WaitUntilSynced(stop) {
		t.Fatal("not synced")
	}
	get := func() []string {
		if e := eps.GetKey("ns/x"); e != nil {
			return e.IPs
		}
		return nil
	}
	if got := get(); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Fatalf("initial endpoints = %v", got)
	}
	before := krt.Stats(eps).Transformations

	// A pod that starts matching joins; only the one dependent service reruns.
	pods.UpdateObject(pod{Name: "b", Namespace: "ns", Labels: labels("app", "x"), IP: "10.0.0.2"})
	eventually(t, "b to join", func() bool { return slices.Equal(get(), []string{"10.0.0.1", "10.0.0.2"}) })
	if n := krt.Stats(eps).Transformations - before; n != 1 {
		t.Errorf("transformations after one pod update = %d, want 1", n)
	}
	// A pod in another namespace does not trigger the service.
	before = krt.Stats(eps).Transformations
	pods.UpdateObject(pod{Name: "c", Namespace: "other", Labels: labels("app", "x"), IP: "10.0.0.9"})
	pods.DeleteObject("ns/a")
	eventually(t, "a to leave", func() bool { return slices.Equal(get(), []string{"10.0.0.2"}) })
	if n := krt.Stats(eps).Transformations - before; n != 1 {
		t.Errorf("transformations = %d, want 1 (the other namespace's pod must not trigger)", n)
	}
	svcs.DeleteObject("ns/x")
	eventually(t, "service removal", func() bool { return eps.GetKey("ns/x") == nil })
}

// A transformation that panics on one input keeps that input's previous
// output, leaves the other inputs alone, and recovers when the input is fixed.
func TestTransformationPanicIsContained(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	svcs := krt.NewStaticCollection(nil, []service{
		{Name: "good", Namespace: "ns", Selector: labels("app", "x")},
		{Name: "bad", Namespace: "ns", Selector: labels("app", "x")},
	}, krt.WithStop(stop))
	out := krt.NewCollection(svcs, func(ctx krt.HandlerContext, s service) *endpoints {
		if s.Selector["app"] == "boom" {
			panic("cannot handle app=boom")
		}
		return &endpoints{Name: s.Name, Namespace: s.Namespace, IPs: []string{s.Selector["app"]}}
	}, krt.WithStop(stop), krt.WithName("PanicTest"))
	out.WaitUntilSynced(stop)
	ips := func(k string) []string {
		if e := out.GetKey(k); e != nil {
			return e.IPs
		}
		return nil
	}
	svcs.UpdateObject(service{Name: "bad", Namespace: "ns", Selector: labels("app", "boom")})
	svcs.UpdateObject(service{Name: "good", Namespace: "ns", Selector: labels("app", "y")})
	eventually(t, "good to follow its input", func() bool { return slices.Equal(ips("ns/good"), []string{"y"}) })
	if got := ips("ns/bad"); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("output of the panicking input = %v, want the previous [x]", got)
	}
	svcs.UpdateObject(service{Name: "bad", Namespace: "ns", Selector: labels("app", "z")})
	eventually(t, "bad to recover", func() bool { return slices.Equal(ips("ns/bad"), []string{"z"}) })
}

// Regression for a bug reported against Istio's krt: adding objects one by one
// to a large index bucket recomputed every dependent of the bucket on every
// add (quadratic). Here each add may only recompute the services whose
// selector matches the new pod.
func TestIndexFetchIsNotQuadratic(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	const n = 2000
	svcs := make([]service, n)
	for i := range svcs {
		svcs[i] = service{Name: fmt.Sprintf("s%d", i), Namespace: "ns", Selector: labels("app", fmt.Sprint(i))}
	}
	pods := krt.NewStaticCollection[pod](nil, nil, krt.WithStop(stop))
	eps := endpointsOf(pods, krt.NewStaticCollection(nil, svcs, krt.WithStop(stop)), stop)
	eps.WaitUntilSynced(stop)
	before := krt.Stats(eps).Transformations
	for i := range n {
		pods.UpdateObject(pod{Name: fmt.Sprintf("p%d", i), Namespace: "ns", Labels: labels("app", fmt.Sprint(i)), IP: fmt.Sprint(i)})
	}
	// 2,000 adds under -race on a loaded 2-core machine took over 10 s once;
	// this test is about run counts, not speed, so the bound is generous.
	poll.Until(t, time.Minute, "every service to see its pod", func() bool {
		e := eps.GetKey(fmt.Sprintf("ns/s%d", n-1))
		return e != nil && len(e.IPs) == 1
	})
	// Each add reruns exactly its one service; allow nothing beyond that.
	if runs := krt.Stats(eps).Transformations - before; runs != n {
		t.Fatalf("%d pod adds into one index bucket caused %d transformation runs, want %d", n, runs, n)
	}
}
