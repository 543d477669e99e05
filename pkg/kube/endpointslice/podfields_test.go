// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"
)

// richPods are Pods that use every field ForService reads (named ports in
// containers and sidecars, hostname and subdomain, node, dual-stack IPs,
// readiness, termination, phase) and many it does not read.
func richPods() []*corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	unread := func(p *corev1.Pod) {
		p.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "cache"}}
		p.Spec.ServiceAccountName = "sa"
		p.Status.HostIP = "192.168.0.1"
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: true}}
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].Image = "example.invalid/server"
			p.Spec.Containers[i].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Reason: "r", Message: "m"})
	}
	sidecar := func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{
			{Name: "init", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 7000, Protocol: corev1.ProtocolTCP}}},
			{Name: "sidecar", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 7001, Protocol: corev1.ProtocolTCP}}},
		}
	}
	named := func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "host-"+p.Name, "svc" }
	return []*corev1.Pod{
		newPod("a", 1, withContainerPort("web", 8080, corev1.ProtocolTCP), named, unread),
		newPod("b", 2, sidecar, withIPs("10.0.0.2", "fd00::2"), unread),
		newPod("c", 3, withContainerPort("web", 9090, ""), notReady, unread),
		newPod("d", 4, withContainerPort("web", 8080, corev1.ProtocolTCP), terminating, unread),
		newPod("e", 5, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, unread),
		newPod("f", 6, func(p *corev1.Pod) { p.Spec.NodeName = "" }, withIPs(), unread),
	}
}

func TestPodFieldsKeepWhatForServiceReads(t *testing.T) {
	pods := richPods()
	before := make([]*corev1.Pod, len(pods))
	reduced := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		before[i] = p.DeepCopy()
		reduced[i] = PodFields(p)
	}
	web := ports(corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("web")})
	svcs := []*corev1.Service{
		newService("svc", web),
		newService("svc", web, headless),
		newService("plain"),
		newService("notready", web, func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
		newService("dual", web, func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		}),
	}
	for _, svc := range svcs {
		want := ForService(svc, pods)
		if got := ForService(svc, reduced); !cmp.Equal(want, got) {
			t.Errorf("service %s: slices from reduced Pods differ (-full +reduced):\n%s", svc.Name, cmp.Diff(want, got))
		}
	}
	if d := cmp.Diff(before, pods); d != "" {
		t.Errorf("PodFields modified its input (-before +after):\n%s", d)
	}
	r := reduced[0]
	if r.Annotations != nil || r.ManagedFields != nil || r.OwnerReferences != nil || r.Spec.Volumes != nil ||
		r.Spec.Containers[0].Image != "" || r.Spec.Containers[0].Env != nil || r.Status.ContainerStatuses != nil ||
		r.Status.Conditions[1].Message != "" {
		t.Errorf("PodFields kept fields ForService does not read: %+v", r)
	}
}

// TestReducePodFieldsIsPodFields: ReducePodFields leaves a Pod equal to what
// PodFields returns for it, over the rich Pods and randomly filled ones
// (every field of a Pod set or not, at random).
func TestReducePodFieldsIsPodFields(t *testing.T) {
	pods := richPods()
	f := randfill.NewWithSeed(17).NilChance(0.3).NumElements(0, 2)
	for range 300 {
		var p corev1.Pod
		f.Fill(&p)
		pods = append(pods, &p)
	}
	for _, p := range pods {
		want := PodFields(p.DeepCopy())
		got := p.DeepCopy()
		ReducePodFields(got)
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("Pod %s/%s reduced in place differs from PodFields (-PodFields +in place):\n%s", p.Namespace, p.Name, d)
		}
	}
}
