// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type parent struct {
	Gateway    string
	Controller string
	Conditions []metav1.Condition
}

var access = ParentAccess[parent]{
	Controller: func(p *parent) string { return p.Controller },
	Key:        func(p *parent) string { return p.Gateway },
	Conditions: func(p *parent) *[]metav1.Condition { return &p.Conditions },
}

func cond(typ string, status metav1.ConditionStatus, at time.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: typ, LastTransitionTime: metav1.NewTime(at)}
}

func TestMergeParents(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	live := []parent{
		{Gateway: "ns/other", Controller: "example.com/other", Conditions: []metav1.Condition{cond("Accepted", "True", t0)}},
		{Gateway: "ns/b", Controller: "ours", Conditions: []metav1.Condition{cond("Accepted", "True", t0), cond("ResolvedRefs", "True", t0)}},
		{Gateway: "ns/gone", Controller: "ours", Conditions: []metav1.Condition{cond("Accepted", "True", t0)}},
		{Gateway: "ns/b", Controller: "example.com/third", Conditions: []metav1.Condition{cond("Accepted", "False", t0)}},
	}
	desired := []parent{
		{Gateway: "ns/c", Controller: "ours", Conditions: []metav1.Condition{cond("Accepted", "True", t1)}},
		// Accepted unchanged: keeps t0. ResolvedRefs flipped: takes t1.
		{Gateway: "ns/b", Controller: "ours", Conditions: []metav1.Condition{cond("Accepted", "True", t1), cond("ResolvedRefs", "False", t1)}},
	}
	got := MergeParents(live, desired, "ours", access)
	// Everyone's entries keep their places; ours that are gone are dropped;
	// new ones of ours go at the end.
	want := []parent{
		live[0],
		{Gateway: "ns/b", Controller: "ours", Conditions: []metav1.Condition{cond("Accepted", "True", t0), cond("ResolvedRefs", "False", t1)}},
		live[3],
		{Gateway: "ns/c", Controller: "ours", Conditions: []metav1.Condition{cond("Accepted", "True", t1)}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("merged parents (-want +got):\n%s", d)
	}
	if live[1].Conditions[0].LastTransitionTime.Time != t0 || len(live) != 4 {
		t.Fatal("MergeParents modified its input")
	}
	if desired[1].Conditions[0].LastTransitionTime.Time != t1 {
		t.Fatal("MergeParents modified desired")
	}
}

func TestMergeParentsRemovesAllOfOurs(t *testing.T) {
	live := []parent{{Gateway: "a", Controller: "ours"}, {Gateway: "b", Controller: "theirs"}}
	got := MergeParents(live, nil, "ours", access)
	if d := cmp.Diff([]parent{{Gateway: "b", Controller: "theirs"}}, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

// When nothing of ours changed, the merge is the live list itself, wherever
// our entries sit, so nothing is written. Two controllers that both merge
// this way reach a fixed point instead of reordering the list at each other.
func TestMergeParentsIsAFixedPoint(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ours := []parent{{Gateway: "a", Controller: "ours", Conditions: []metav1.Condition{cond("Accepted", "True", t0)}}}
	theirs := []parent{{Gateway: "b", Controller: "theirs", Conditions: []metav1.Condition{cond("Accepted", "True", t0)}}}
	live := append(slices.Clone(ours), theirs...) // ours first, theirs last
	if got := MergeParents(live, ours, "ours", access); !cmp.Equal(got, live) {
		t.Fatalf("unchanged entries were reordered: %+v", got)
	}
	list := []parent{}
	for i := range 4 {
		prev := slices.Clone(list)
		list = MergeParents(list, ours, "ours", access)
		list = MergeParents(list, theirs, "theirs", access)
		if i > 0 && !cmp.Equal(prev, list) {
			t.Fatalf("round %d changed the list again: %+v -> %+v", i, prev, list)
		}
	}
}

func TestStampTransitionTimes(t *testing.T) {
	now, set := metav1.Unix(100, 0), metav1.Unix(5, 0)
	in := []metav1.Condition{{Type: "A"}, {Type: "B", LastTransitionTime: set}}
	out := StampTransitionTimes(in, now)
	if !out[0].LastTransitionTime.Equal(&now) || !out[1].LastTransitionTime.Equal(&set) {
		t.Errorf("got %v, %v; want the zero time stamped and the set one kept", out[0].LastTransitionTime, out[1].LastTransitionTime)
	}
	if !in[0].LastTransitionTime.IsZero() {
		t.Error("the input was modified")
	}
}
