// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ParentAccess tells MergeParents how to read one kind of parent status entry
// (gateway-api's RouteParentStatus, GIE's ParentStatus).
type ParentAccess[P any] struct {
	// Controller returns the entry's controllerName.
	Controller func(p *P) string
	// Key identifies the parent (group/kind/namespace/name/section/port), so
	// an entry can be matched with its previous version.
	Key func(p *P) string
	// Conditions returns a pointer to the entry's conditions.
	Conditions func(p *P) *[]metav1.Condition
}

// MergeParents returns the parents list to write: live with our entries
// (those whose controller is controller) replaced by desired. Everyone else's
// entries stay unchanged and in place; our entries that are still desired
// stay in their place too, those no longer desired are dropped, and new ones
// are appended sorted by key. Keeping positions matters: when nothing of ours
// changed the result equals live, so the caller writes nothing, and two
// controllers merging this way never rewrite the list at each other only to
// reorder it. Each desired condition whose type and status equal the live
// entry's keeps the live lastTransitionTime. desired entries must carry
// controller; live and desired are not modified.
func MergeParents[P any](live, desired []P, controller string, a ParentAccess[P]) []P {
	want := make(map[string]P, len(desired))
	for _, d := range desired {
		want[a.Key(&d)] = d
	}
	out := make([]P, 0, len(live)+len(desired))
	placed := map[string]bool{}
	for i := range live {
		if a.Controller(&live[i]) != controller {
			out = append(out, live[i])
			continue
		}
		k := a.Key(&live[i])
		d, ok := want[k]
		if !ok || placed[k] {
			continue // no longer desired, or a duplicate of ours
		}
		*a.Conditions(&d) = KeepTransitionTimes(*a.Conditions(&d), *a.Conditions(&live[i]))
		out = append(out, d)
		placed[k] = true
	}
	var added []P
	for k, d := range want {
		if !placed[k] {
			added = append(added, d)
		}
	}
	slices.SortFunc(added, func(x, y P) int { return strings.Compare(a.Key(&x), a.Key(&y)) })
	return append(out, added...)
}

// KeepTransitionTimes returns desired with each condition's
// lastTransitionTime taken from the live condition of the same type when its
// status is unchanged (the Kubernetes API convention: the time records the
// last change of status, not the last write).
func KeepTransitionTimes(desired, live []metav1.Condition) []metav1.Condition {
	out := slices.Clone(desired)
	for i := range out {
		if old := meta.FindStatusCondition(live, out[i].Type); old != nil && old.Status == out[i].Status {
			out[i].LastTransitionTime = old.LastTransitionTime
		}
	}
	return out
}

// StampTransitionTimes returns conds with every zero lastTransitionTime set
// to now. Desired conditions are computed with the time left zero, so that a
// recomputation gives an equal value; stamping them at write time, then
// KeepTransitionTimes against the live conditions, gives each condition the
// time its status last changed.
func StampTransitionTimes(conds []metav1.Condition, now metav1.Time) []metav1.Condition {
	out := slices.Clone(conds)
	for i := range out {
		if out[i].LastTransitionTime.IsZero() {
			out[i].LastTransitionTime = now
		}
	}
	return out
}
