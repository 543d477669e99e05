// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// runtimeFields are the values of a pod that exist only once it runs.
type runtimeFields struct {
	podIP, hostIP string
}

// fieldRefValue returns the value of a downward API fieldRef for pod, as the
// kubelet's podFieldSelectorRuntimeValue and fieldpath.ExtractFieldPathAsString
// do (k8s.io/kubernetes pkg/kubelet/kubelet_pods.go, pkg/fieldpath).
// Only apiVersion v1 is accepted.
func fieldRefValue(ref *corev1.ObjectFieldSelector, pod *corev1.Pod, rt runtimeFields) (string, error) {
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		return "", fmt.Errorf("fieldRef %s: unsupported apiVersion %q", ref.FieldPath, ref.APIVersion)
	}
	switch p := ref.FieldPath; p {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return rt.podIP, nil
	case "status.hostIP", "status.hostIPs":
		return rt.hostIP, nil
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	default:
		if key, ok := subscript(p, "metadata.labels"); ok {
			return pod.Labels[key], nil
		}
		if key, ok := subscript(p, "metadata.annotations"); ok {
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("fieldRef %s: unsupported field path", p)
	}
}

// subscript parses path as prefix['key'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// formatMap renders m as the downward API does: sorted key="value" lines.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, k+"="+strconv.Quote(m[k]))
	}
	return strings.Join(lines, "\n")
}
