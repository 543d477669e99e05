// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// readyStatus is the status a service gets: how many pods it selects. A service
// without a selector gets no status.
type readyStatus struct{ Ready int }

type svcReady = krt.ObjectWithStatus[service, readyStatus]

func statusOf(pods krt.Collection[pod]) krt.TransformationSingleStatus[service, readyStatus, endpoints] {
	return func(ctx krt.HandlerContext, s service) (*readyStatus, *endpoints) {
		ps := krt.Fetch(ctx, pods, krt.FilterNamespace(s.Namespace), krt.FilterLabel(s.Selector))
		ips := make([]string, 0, len(ps))
		for _, p := range ps {
			ips = append(ips, p.IP)
		}
		slices.Sort(ips)
		out := &endpoints{Name: s.Name, Namespace: s.Namespace, IPs: ips}
		if len(s.Selector) == 0 {
			return nil, out
		}
		return &readyStatus{Ready: len(ps)}, out
	}
}

func TestStatusCollection(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA, podB, podC}, krt.WithStop(stop))
	svcX := service{Name: "x", Namespace: "ns", Selector: labels("app", "x")}
	svcs := krt.NewStaticCollection(nil, []service{svcX}, krt.WithStop(stop))
	statuses, eps := krt.NewStatusCollection(svcs, statusOf(pods), krt.WithStop(stop))
	waitSynced(t, statuses)
	waitSynced(t, eps)

	if diff := cmp.Diff([]svcReady{{Obj: svcX, Status: readyStatus{Ready: 2}}}, statuses.List()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if got := statuses.GetKey("ns/x"); got == nil || got.Status.Ready != 2 {
		t.Errorf("status GetKey(ns/x) = %+v, want Ready 2 (keyed like the input)", got)
	}
	wantEps := endpoints{Name: "x", Namespace: "ns", IPs: []string{"10.0.0.1", "10.0.0.3"}}
	if diff := cmp.Diff([]endpoints{wantEps}, eps.List()); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}

	// Input deleted: both the status and the output go.
	svcs.DeleteObject("ns/x")
	eventually(t, "status and output removal", func() bool { return len(statuses.List()) == 0 && len(eps.List()) == 0 })
}

func TestStatusNilRemovesEntry(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop))
	svcX := service{Name: "x", Namespace: "ns", Selector: labels("app", "x")}
	svcs := krt.NewStaticCollection(nil, []service{svcX}, krt.WithStop(stop))
	statuses, eps := krt.NewStatusCollection(svcs, statusOf(pods), krt.WithStop(stop))
	waitSynced(t, statuses)
	r := record(t, statuses)
	r.expect(t, addEv(svcReady{Obj: svcX, Status: readyStatus{1}}))

	noSelector := service{Name: "x", Namespace: "ns"}
	svcs.UpdateObject(noSelector)
	r.expect(t, addEv(svcReady{Obj: svcX, Status: readyStatus{1}}), delEv(svcReady{Obj: svcX, Status: readyStatus{1}}))
	if got := statuses.GetKey("ns/x"); got != nil {
		t.Errorf("status after nil = %+v, want none", got)
	}
	// The output does not depend on the status.
	eventually(t, "the output of the selector-less service", func() bool {
		e := eps.GetKey("ns/x")
		return e != nil && len(e.IPs) == 1 // an empty FilterLabel matches every pod
	})
}

func TestStatusEqualEmitsNothing(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop))
	svcX := service{Name: "x", Namespace: "ns", Selector: labels("app", "x")}
	svcs := krt.NewStaticCollection(nil, []service{svcX}, krt.WithStop(stop))
	statuses, eps := krt.NewStatusCollection(svcs, statusOf(pods), krt.WithStop(stop))
	waitSynced(t, statuses)
	r := record(t, statuses)
	first := svcReady{Obj: svcX, Status: readyStatus{1}}
	r.expect(t, addEv(first))

	// The pod's IP changes: the transformation reruns and the output changes,
	// the status (a count) does not. Re-setting the equal input changes
	// nothing either.
	runs := krt.Stats(eps).Transformations
	pods.UpdateObject(withIP(podA, "10.0.0.9"))
	eventually(t, "the new IP", func() bool {
		e := eps.GetKey("ns/x")
		return e != nil && slices.Equal(e.IPs, []string{"10.0.0.9"})
	})
	svcs.UpdateObject(svcX)
	eventually(t, "the rerun for the equal input", func() bool { return krt.Stats(eps).Transformations >= runs+2 })
	// A real status change, after which nothing else may have arrived.
	pods.UpdateObject(podC)
	r.expect(t, addEv(first), updEv(first, svcReady{Obj: svcX, Status: readyStatus{2}}))
}

// portStatus is a status for NewStatusManyCollection: the outputs' names.
type portStatus struct{ Outputs []string }

func TestStatusManyCollection(t *testing.T) {
	stop := newStop(t)
	svcs := krt.NewStaticCollection(nil, []service{
		{Name: "x", Namespace: "ns", Selector: labels("app", "x", "tier", "web")},
		{Name: "y", Namespace: "ns"},
	}, krt.WithStop(stop))
	// One output per selector pair; no status for a service without outputs.
	statuses, outs := krt.NewStatusManyCollection(svcs, func(_ krt.HandlerContext, s service) (*portStatus, []view) {
		var vs []view
		var names []string
		for k, v := range s.Selector {
			n := s.Name + "-" + k
			vs = append(vs, view{Name: n, Items: []string{v}})
			names = append(names, n)
		}
		if len(vs) == 0 {
			return nil, nil
		}
		slices.Sort(names)
		return &portStatus{Outputs: names}, vs
	}, krt.WithStop(stop))
	waitSynced(t, statuses)
	waitSynced(t, outs)

	if diff := cmp.Diff([]string{"x-app", "x-tier"}, keysOf(outs.List())); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ns/x"}, keysOfStatus(statuses.List())); diff != "" {
		t.Errorf("status keys (-want +got):\n%s", diff)
	}
	if got := statuses.GetKey("ns/x"); got == nil || !slices.Equal(got.Status.Outputs, []string{"x-app", "x-tier"}) {
		t.Errorf("status of ns/x = %+v", got)
	}

	svcs.UpdateObject(service{Name: "x", Namespace: "ns", Selector: labels("app", "x")})
	svcs.UpdateObject(service{Name: "y", Namespace: "ns", Selector: labels("zone", "a")})
	eventually(t, "outputs to follow", func() bool {
		return slices.Equal(keysOf(outs.List()), []string{"x-app", "y-zone"}) &&
			slices.Equal(keysOfStatus(statuses.List()), []string{"ns/x", "ns/y"})
	})
}

func keysOfStatus[S any](objs []krt.ObjectWithStatus[service, S]) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Obj.ResourceName()
	}
	return out
}
