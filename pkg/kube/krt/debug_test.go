// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// serveDump fetches the handler's JSON and decodes it.
func serveDump(t *testing.T, h *krt.DebugHandler) []krt.CollectionDump {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/krtz", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var out []krt.CollectionDump
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("decoding %q: %v", rec.Body.String(), err)
	}
	return out
}

func dumpNames(ds []krt.CollectionDump) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return out
}

func TestDebugHandlerDump(t *testing.T) {
	stop := newStop(t)
	h := krt.NewDebugHandler()
	dbg := krt.WithDebugging(h)
	pods := krt.NewStaticCollection(nil, []pod{podA, podB}, krt.WithStop(stop), krt.WithName("Pods"), dbg)
	svcs := krt.NewStaticCollection(nil, []service{
		{Name: "x", Namespace: "ns", Selector: labels("app", "x")},
		{Name: "y", Namespace: "ns", Selector: labels("app", "y")},
	}, krt.WithStop(stop), krt.WithName("Services"), dbg)
	byNS := krt.NewNamespaceIndex(pods)
	eps := krt.NewCollection(svcs, func(ctx krt.HandlerContext, s service) *endpoints {
		ps := byNS.Fetch(ctx, s.Namespace, krt.FilterLabel(s.Selector))
		if len(ps) == 0 {
			return nil
		}
		return &endpoints{Name: s.Name + "-eps", Namespace: s.Namespace}
	}, krt.WithStop(stop), krt.WithName("Endpoints"), dbg)
	waitSynced(t, eps)
	pods.DeleteObject("ns/b") // y now produces no output, yet keeps its dependency
	eventually(t, "ns/y-eps removal", func() bool { return eps.GetKey("ns/y-eps") == nil })

	got := serveDump(t, h)
	if diff := cmp.Diff([]string{"Endpoints", "Pods", "Services"}, dumpNames(got)); diff != "" {
		t.Fatalf("collections (-want +got):\n%s", diff)
	}
	ignore := cmpopts.IgnoreFields(krt.CollectionDump{}, "UID", "Type", "Transformations")
	wantPods := krt.CollectionDump{Name: "Pods", Synced: true, Keys: []string{"ns/a"}}
	if diff := cmp.Diff(wantPods, got[1], ignore); diff != "" {
		t.Errorf("Pods dump (-want +got):\n%s", diff)
	}
	wantSvcs := krt.CollectionDump{Name: "Services", Synced: true, Keys: []string{"ns/x", "ns/y"}}
	if diff := cmp.Diff(wantSvcs, got[2], ignore); diff != "" {
		t.Errorf("Services dump (-want +got):\n%s", diff)
	}
	depX := krt.DependencyDump{Collection: "Pods", Filter: "index namespace=ns labels={app=x}"}
	depY := krt.DependencyDump{Collection: "Pods", Filter: "index namespace=ns labels={app=y}"}
	wantEps := krt.CollectionDump{
		Name: "Endpoints", Synced: true, Keys: []string{"ns/x-eps"},
		Derived: &krt.DerivedDump{
			Sources: []krt.SourceDump{{Name: "Services", Synced: true}, {Name: "Pods", Synced: true, Dependents: 2}},
			Inputs: map[string]krt.InputDump{
				"ns/x": {Outputs: []string{"ns/x-eps"}, Dependencies: []krt.DependencyDump{depX}},
				"ns/y": {Dependencies: []krt.DependencyDump{depY}},
			},
		},
	}
	if diff := cmp.Diff(wantEps, got[0], ignore, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Endpoints dump (-want +got):\n%s", diff)
	}
	if got[0].Transformations < 3 {
		t.Errorf("Endpoints transformations = %d, want at least 3", got[0].Transformations)
	}
	if got[0].UID == got[1].UID || got[1].UID == got[2].UID {
		t.Errorf("UIDs are not distinct: %d %d %d", got[0].UID, got[1].UID, got[2].UID)
	}
}

func TestDebugHandlerUnsyncedAndStopped(t *testing.T) {
	h := krt.NewDebugHandler()
	syncer := krt.NewManualSyncer()
	inputStop, derivedStop := make(chan struct{}), make(chan struct{})
	defer close(inputStop)
	pods := krt.NewStaticCollection(syncer, []pod{podA}, krt.WithStop(inputStop), krt.WithName("Pods"), krt.WithDebugging(h))
	copies := krt.NewCollection(pods, func(_ krt.HandlerContext, p pod) *pod { return &p },
		krt.WithStop(derivedStop), krt.WithName("Copies"), krt.WithDebugging(h))
	eventually(t, "the copy", func() bool { return copies.GetKey("ns/a") != nil })

	got := h.Dump()
	if diff := cmp.Diff([]string{"Copies", "Pods"}, dumpNames(got)); diff != "" {
		t.Fatalf("collections (-want +got):\n%s", diff)
	}
	if got[0].Synced || got[1].Synced {
		t.Errorf("synced in the dump before the syncer: %v %v", got[0].Synced, got[1].Synced)
	}
	syncer.MarkSynced()
	waitSynced(t, copies)
	eventually(t, "synced in the dump", func() bool {
		d := h.Dump()
		return len(d) == 2 && d[0].Synced && d[1].Synced
	})

	close(derivedStop)
	eventually(t, "the stopped collection to leave the dump", func() bool {
		return slices.Equal(dumpNames(h.Dump()), []string{"Pods"})
	})
	if got := dumpNames(serveDump(t, h)); !slices.Equal(got, []string{"Pods"}) {
		t.Errorf("served collections = %v, want [Pods]", got)
	}
}

// A collection created with an already closed stop channel is stopped from the
// start, so it must not stay in the dump. Dumps run concurrently to widen the
// window between the collection's stop handling and its registration with the
// handler; under -race the unsynchronized access also reports.
func TestDebugHandlerCollectionCreatedStopped(t *testing.T) {
	stopped := make(chan struct{})
	close(stopped)
	for i := range 100 {
		h := krt.NewDebugHandler()
		done, exited := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(exited)
			for {
				select {
				case <-done:
					return
				default:
					h.Dump()
				}
			}
		}()
		krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stopped), krt.WithDebugging(h))
		krt.NewStatic(&podCount{1}, true, krt.WithStop(stopped), krt.WithDebugging(h))
		close(done)
		<-exited
		eventually(t, "stopped collections to leave the dump", func() bool { return len(h.Dump()) == 0 })
		if t.Failed() {
			t.Fatalf("iteration %d", i)
		}
	}
}
