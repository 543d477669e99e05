// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"maps"
	"reflect"
	"strconv"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// generation is an output whose Equals ignores Note: two generations with the
// same Name and Gen are equal whatever their notes say.
type generation struct {
	Name string
	Gen  int
	Note string
}

func (g generation) ResourceName() string { return g.Name }
func (g generation) Equals(o generation) bool {
	return g.Name == o.Name && g.Gen == o.Gen
}

func TestEqualsMethodSuppressesEvents(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop))
	gens := krt.NewCollection(pods, func(_ krt.HandlerContext, p pod) *generation {
		return &generation{Name: p.Name, Gen: len(p.Labels), Note: p.IP}
	}, krt.WithStop(stop))
	waitSynced(t, gens)
	r := record(t, gens)
	initial := generation{Name: "a", Gen: 1, Note: "10.0.0.1"}
	r.expect(t, addEv(initial))
	runs := krt.Stats(gens).Transformations

	// Note changes, Equals says equal: the transformation runs, nothing is
	// emitted. The label change after it is a real change and is emitted.
	pods.UpdateObject(withIP(podA, "10.0.0.9"))
	eventually(t, "rerun", func() bool { return krt.Stats(gens).Transformations > runs })
	twoLabels := pod{Name: "a", Namespace: "ns", Labels: labels("app", "x", "tier", "web"), IP: "10.0.0.9"}
	pods.UpdateObject(twoLabels)
	r.expect(t, addEv(initial), updEv(initial, generation{Name: "a", Gen: 2, Note: "10.0.0.9"}))

	// The same holds for a static collection of the type.
	static := krt.NewStaticCollection(nil, []generation{initial})
	sr := record(t, static)
	static.ConditionalUpdateObject(generation{Name: "a", Gen: 1, Note: "other"})
	static.ConditionalUpdateObject(generation{Name: "a", Gen: 3})
	sr.expect(t, addEv(initial), updEv(initial, generation{Name: "a", Gen: 3}))
}

func TestProtoMessagesUseProtoEqual(t *testing.T) {
	// An empty Struct with a nil map and one with an empty map are the same
	// message, though reflect.DeepEqual tells them apart.
	nilFields := &structpb.Struct{}
	emptyFields := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	if reflect.DeepEqual(nilFields, emptyFields) {
		t.Fatal("precondition: the two structs must differ under reflect.DeepEqual")
	}
	s := krt.NewStatic(&nilFields, true)
	r := record(t, s)
	s.Set(&emptyFields) // proto.Equal: no event
	changed, err := structpb.NewStruct(map[string]any{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	s.Set(&changed)
	got := r.wait(t, 2)
	checkEventShapes(t, got)
	if len(got) != 2 || got[0].Event != krt.EventAdd || got[1].Event != krt.EventUpdate ||
		(*got[1].New).GetFields()["k"].GetStringValue() != "v" {
		t.Fatalf("events = %v, want add then one update to {k: v}", got)
	}
}

func TestProtoDerivedSingletonRecomputedEqualEmitsNothing(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA, podB}, krt.WithStop(stop))
	count := krt.NewSingleton(func(ctx krt.HandlerContext) **wrapperspb.StringValue {
		v := wrapperspb.String(strconv.Itoa(len(krt.Fetch(ctx, pods))))
		return &v
	}, krt.WithStop(stop))
	waitSynced(t, count.AsCollection())
	r := record(t, count)
	runs := krt.Stats(count).Transformations

	pods.UpdateObject(withIP(podA, "10.0.0.9")) // same count: recomputed, equal
	eventually(t, "rerun", func() bool { return krt.Stats(count).Transformations > runs })
	pods.UpdateObject(podC) // count 3
	got := r.wait(t, 2)
	checkEventShapes(t, got)
	if len(got) != 2 || (*got[0].New).GetValue() != "2" || got[1].Event != krt.EventUpdate || (*got[1].New).GetValue() != "3" {
		t.Fatalf("events = %v, want add(2) then update(3)", got)
	}
}

// summary has no Equals and is no proto: outputs compare with deep equality.
type summary struct {
	Key    string
	Labels map[string]string
}

func (s summary) ResourceName() string { return s.Key }

func TestDeepEqualDerivedOutputEmitsNothing(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop))
	sums := krt.NewCollection(pods, func(_ krt.HandlerContext, p pod) *summary {
		// A fresh map every run: equal only by deep comparison.
		return &summary{Key: p.ResourceName(), Labels: maps.Clone(p.Labels)}
	}, krt.WithStop(stop))
	waitSynced(t, sums)
	r := record(t, sums)
	first := summary{Key: "ns/a", Labels: labels("app", "x")}
	r.expect(t, addEv(first))
	runs := krt.Stats(sums).Transformations

	pods.UpdateObject(withIP(podA, "10.0.0.9")) // output unchanged
	eventually(t, "rerun", func() bool { return krt.Stats(sums).Transformations > runs })
	relabelled := pod{Name: "a", Namespace: "ns", Labels: labels("app", "z"), IP: "10.0.0.9"}
	pods.UpdateObject(relabelled)
	r.expect(t, addEv(first), updEv(first, summary{Key: "ns/a", Labels: labels("app", "z")}))
}
