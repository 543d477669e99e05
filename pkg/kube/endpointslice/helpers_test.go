// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const ns = "ns"

// newPod returns a running, ready Pod in ns labelled app=web with IP
// 10.0.0.<n>, changed by mods.
func newPod(name string, n int, mods ...func(*corev1.Pod)) *corev1.Pod {
	ip := fmt.Sprintf("10.0.%d.%d", n/250, n%250+1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      ip,
			PodIPs:     []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func notReady(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
}

func terminating(p *corev1.Pod) {
	now := metav1.Now()
	p.DeletionTimestamp = &now
}

func withLabels(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withIPs(ips ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.PodIP, p.Status.PodIPs = "", nil
		for i, ip := range ips {
			if i == 0 {
				p.Status.PodIP = ip
			}
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
	}
}

// withContainerPort adds a container port (protocol TCP unless given).
func withContainerPort(name string, port int32, proto corev1.Protocol) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if len(p.Spec.Containers) == 0 {
			p.Spec.Containers = []corev1.Container{{Name: "main"}}
		}
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
			corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: proto})
	}
}

// newService returns a ClusterIP Service in ns selecting app=web, with one
// TCP port 80 -> 8080 named http, changed by mods.
func newService(name string, mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec: corev1.ServiceSpec{
			ClusterIP:  "10.96.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Selector:   map[string]string{"app": "web"},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func selector(kv ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Selector = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			s.Spec.Selector[kv[i]] = kv[i+1]
		}
	}
}

func headless(s *corev1.Service) {
	s.Spec.ClusterIP = corev1.ClusterIPNone
	s.Spec.IPFamilies = nil
}

func ports(ps ...corev1.ServicePort) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Ports = ps }
}

// endpointNames returns the target Pod names of every endpoint of ss, in
// slice then endpoint order.
func endpointNames(ss []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range ss {
		for _, e := range s.Endpoints {
			out = append(out, e.TargetRef.Name)
		}
	}
	return out
}

// portSummary renders a slice's ports as "name:port/proto" strings.
func portSummary(s *discoveryv1.EndpointSlice) []string {
	out := []string{}
	for _, p := range s.Ports {
		out = append(out, fmt.Sprintf("%s:%d/%s", *p.Name, *p.Port, *p.Protocol))
	}
	return out
}

func mustOne(t *testing.T, ss []*discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	t.Helper()
	if len(ss) != 1 {
		t.Fatalf("got %d slices, want 1: %+v", len(ss), ss)
	}
	return ss[0]
}
