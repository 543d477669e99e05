// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"fmt"
	"math"
	"runtime"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// nodeMemory stands for the Node's allocatable memory, which the kubelet
// reports for a memory limit the container does not set (nodeobject.go
// advertises the same capacity; CPUs likewise are runtime.NumCPU).
var nodeMemory = resource.MustParse("16Gi")

// resourceFieldRefValue is the downward API's resourceFieldRef, as the
// kubelet's ExtractResourceValueByContainerName (k8s.io/kubernetes
// pkg/api/v1/resource/helpers.go) computes it: the named container's (or
// this one's) request or limit of cpu or memory, divided by the divisor
// (default 1) and rounded up; a limit the container does not set is the
// Node's allocatable amount.
func resourceFieldRefValue(ref *corev1.ResourceFieldSelector, pod *corev1.Pod, self *corev1.Container) (string, error) {
	c := self
	if ref.ContainerName != "" && ref.ContainerName != self.Name {
		c = nil
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == ref.ContainerName {
				c = &pod.Spec.Containers[i]
			}
		}
		if c == nil {
			return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	var q resource.Quantity
	var ok bool
	switch ref.Resource {
	case "limits.cpu":
		if q, ok = c.Resources.Limits[corev1.ResourceCPU]; !ok {
			q = *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)
		}
	case "limits.memory":
		if q, ok = c.Resources.Limits[corev1.ResourceMemory]; !ok {
			q = nodeMemory
		}
	case "requests.cpu":
		q = c.Resources.Requests[corev1.ResourceCPU]
	case "requests.memory":
		q = c.Resources.Requests[corev1.ResourceMemory]
	default:
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	if ref.Resource == "limits.cpu" || ref.Resource == "requests.cpu" {
		// convertResourceCPUToString: ceil(milli / divisor milli).
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	// convertResourceMemoryToString: ceil(value / divisor).
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}
