// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNoSlices(t *testing.T) {
	pods := []*corev1.Pod{newPod("a", 0)}
	cases := map[string]func(*corev1.Service){
		"no selector":    func(s *corev1.Service) { s.Spec.Selector = nil },
		"empty selector": func(s *corev1.Service) { s.Spec.Selector = map[string]string{} },
		"ExternalName":   func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ForService(newService("svc", mod), pods); got != nil {
				t.Errorf("ForService = %+v, want nil", got)
			}
		})
	}
}

func manyPods(n int) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		// Reverse order, so sorting is exercised.
		out[i] = newPod(fmt.Sprintf("p-%03d", n-1-i), n-1-i)
	}
	return out
}

func TestSplitsAtMaxEndpoints(t *testing.T) {
	svc := newService("svc")
	ss := ForService(svc, manyPods(250))
	var sizes []int
	for _, s := range ss {
		sizes = append(sizes, len(s.Endpoints))
	}
	slices.Sort(sizes)
	if d := cmp.Diff([]int{50, 100, 100}, sizes); d != "" {
		t.Errorf("slice sizes (-want +got):\n%s", d)
	}
	names := endpointNames(ss)
	slices.Sort(names)
	if len(slices.Compact(names)) != 250 {
		t.Errorf("got %d distinct endpoints, want 250", len(slices.Compact(names)))
	}
	for i := 1; i < len(ss); i++ {
		if ss[i-1].Name >= ss[i].Name {
			t.Errorf("slices not sorted by name: %q before %q", ss[i-1].Name, ss[i].Name)
		}
	}
	for _, s := range ss {
		if !slices.IsSortedFunc(s.Endpoints, func(a, b discoveryv1.Endpoint) int { return strings.Compare(a.TargetRef.Name, b.TargetRef.Name) }) {
			t.Errorf("slice %s: endpoints not sorted by pod name", s.Name)
		}
	}

	// Same inputs, same output; one more pod keeps every name.
	if d := cmp.Diff(ss, ForService(svc, manyPods(250))); d != "" {
		t.Errorf("second run differs (-first +second):\n%s", d)
	}
	more := ForService(svc, manyPods(251))
	for i, s := range ss {
		if more[i].Name != s.Name {
			t.Errorf("slice %d renamed from %s to %s by one more pod", i, s.Name, more[i].Name)
		}
	}
}

func TestSliceMetadata(t *testing.T) {
	svc := newService("svc", func(s *corev1.Service) {
		s.Labels = map[string]string{
			"team":                       "a",
			discoveryv1.LabelServiceName: "spoof",
			discoveryv1.LabelManagedBy:   "spoof",
			corev1.IsHeadlessService:     "spoof",
		}
	})
	s := mustOne(t, ForService(svc, []*corev1.Pod{newPod("a", 0)}))
	tr := true
	want := metav1.ObjectMeta{
		Name:      s.Name,
		Namespace: ns,
		Labels: map[string]string{
			"team":                       "a",
			discoveryv1.LabelServiceName: "svc",
			discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
		},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Service", Name: "svc", UID: "uid-svc", Controller: &tr, BlockOwnerDeletion: &tr,
		}},
	}
	if d := cmp.Diff(want, s.ObjectMeta); d != "" {
		t.Errorf("metadata (-want +got):\n%s", d)
	}
	if !strings.HasPrefix(s.Name, "svc-") || len(s.Name) != len("svc-")+8 {
		t.Errorf("name %q, want svc-<8 hex digits>", s.Name)
	}

	h := mustOne(t, ForService(newService("svc", headless), []*corev1.Pod{newPod("a", 0)}))
	if v, ok := h.Labels[corev1.IsHeadlessService]; !ok || v != "" {
		t.Errorf("headless Service's slice labels %v, want %s=\"\"", h.Labels, corev1.IsHeadlessService)
	}
}

func TestInputsNotModified(t *testing.T) {
	svc := newService("svc")
	pods := manyPods(3)
	before := []any{svc.DeepCopy(), pods[0].DeepCopy(), pods[1].DeepCopy(), pods[2].DeepCopy()}
	ForService(svc, pods)
	after := []any{svc, pods[0], pods[1], pods[2]}
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("inputs modified (-before +after):\n%s", d)
	}
}
