// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"runtime"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeletVersion is what the Node reports: the Kubernetes version whose
// kubelet this node stands in for, marked as not being one.
const kubeletVersion = "v1.37.2-infermesh-node"

// nodeObject is the Node virtual-kubelet registers and keeps: Ready, the
// bridge address as InternalIP, the pod CIDR, and capacity for 110 pods
// (the kubelet's default maxPods). CPU and memory are the host's, not
// reserved: this node admits every pod the scheduler sends.
func (n *provider) nodeObject() *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname": n.cfg.NodeName,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     runtime.GOARCH,
		"type":                   "infermesh-node",
	}
	for k, v := range n.cfg.Labels {
		labels[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.cfg.NodeName, Labels: labels},
		Spec:       corev1.NodeSpec{PodCIDR: n.cfg.PodCIDR.String(), PodCIDRs: []string{n.cfg.PodCIDR.String()}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.hostIP()},
				{Type: corev1.NodeHostName, Address: n.cfg.NodeName},
			},
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "infermesh node agent is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(n.cfg.KubeletPort)}},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: kubeletVersion, OperatingSystem: "linux", Architecture: runtime.GOARCH,
				ContainerRuntimeVersion: "process://" + runtime.Version(),
			},
		},
	}
}
