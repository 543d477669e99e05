// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"runtime"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestResourceFieldRefFollowsTheKubelet(t *testing.T) {
	main := corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceCPU: resource.MustParse("1500m")},
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi"), corev1.ResourceCPU: resource.MustParse("100m")},
	}}
	side := corev1.Container{Name: "side"}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{main, side}}}
	for _, tc := range []struct {
		ref  corev1.ResourceFieldSelector
		self *corev1.Container
		want string
	}{
		{corev1.ResourceFieldSelector{Resource: "limits.memory"}, &main, "1073741824"},
		{corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}, &main, "1024"},
		{corev1.ResourceFieldSelector{Resource: "requests.memory", Divisor: resource.MustParse("1M")}, &main, "269"},
		{corev1.ResourceFieldSelector{Resource: "limits.cpu"}, &main, "2"},
		{corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}, &main, "100"},
		{corev1.ResourceFieldSelector{Resource: "limits.cpu", ContainerName: "main"}, &side, "2"},
		{corev1.ResourceFieldSelector{Resource: "limits.memory"}, &side, "17179869184"},
		{corev1.ResourceFieldSelector{Resource: "limits.cpu"}, &side, strconv.Itoa(runtime.NumCPU())},
	} {
		got, err := resourceFieldRefValue(&tc.ref, pod, tc.self)
		if err != nil || got != tc.want {
			t.Errorf("%+v in %s: %q, %v; want %q", tc.ref, tc.self.Name, got, err, tc.want)
		}
	}
	if _, err := resourceFieldRefValue(&corev1.ResourceFieldSelector{Resource: "limits.ephemeral-storage"}, pod, &main); err == nil {
		t.Error("limits.ephemeral-storage: want an error")
	}
}
