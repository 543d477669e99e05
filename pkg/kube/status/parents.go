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

// MergeParents returns the parents list to write: every entry of live whose
// controller is not controller, unchanged and in its place, followed by
// desired (our entries) sorted by key. Each desired condition whose type and
// status equal the live entry's keeps the live lastTransitionTime. desired
// entries must carry controller; live is not modified.
func MergeParents[P any](live, desired []P, controller string, a ParentAccess[P]) []P {
	out := make([]P, 0, len(live)+len(desired))
	previous := map[string]*P{}
	for i := range live {
		if a.Controller(&live[i]) == controller {
			previous[a.Key(&live[i])] = &live[i]
			continue
		}
		out = append(out, live[i])
	}
	ours := slices.Clone(desired)
	slices.SortFunc(ours, func(x, y P) int { return strings.Compare(a.Key(&x), a.Key(&y)) })
	for i := range ours {
		if prev := previous[a.Key(&ours[i])]; prev != nil {
			*a.Conditions(&ours[i]) = KeepTransitionTimes(*a.Conditions(&ours[i]), *a.Conditions(prev))
		}
	}
	return append(out, ours...)
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
