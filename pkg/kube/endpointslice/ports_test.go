// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func cmpSortSlices[E any](less func(a, b E) bool) cmp.Option { return cmpopts.SortSlices(less) }

// groups renders slices as pod names per port set, e.g. "http:8080/TCP" ->
// [a b].
func groups(ss []*discoveryv1.EndpointSlice) map[string][]string {
	out := map[string][]string{}
	for _, s := range ss {
		k := ""
		for _, p := range portSummary(s) {
			k += p + " "
		}
		out[k] = append(out[k], endpointNames([]*discoveryv1.EndpointSlice{s})...)
	}
	return out
}

func TestTargetPortResolution(t *testing.T) {
	named := ports(corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("web")})
	sidecar := func(p *corev1.Pod) {
		always := corev1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = []corev1.Container{
			{Name: "init", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 7000}}},
			{Name: "sidecar", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 7001}}},
		}
	}
	cases := []struct {
		name string
		svc  func(*corev1.Service)
		pods []*corev1.Pod
		want map[string][]string
	}{
		{
			name: "int targetPort used as is",
			svc:  func(*corev1.Service) {},
			pods: []*corev1.Pod{newPod("a", 0)},
			want: map[string][]string{"http:8080/TCP ": {"a"}},
		},
		{
			name: "unset targetPort and protocol: the port, TCP",
			svc:  ports(corev1.ServicePort{Name: "http", Port: 80}),
			pods: []*corev1.Pod{newPod("a", 0)},
			want: map[string][]string{"http:80/TCP ": {"a"}},
		},
		{
			name: "named targetPort per pod; a pod lacking the name is left out of the mapping",
			svc:  named,
			pods: []*corev1.Pod{
				newPod("a", 0, withContainerPort("web", 8080, "")),
				newPod("b", 1, withContainerPort("web", 8080, corev1.ProtocolTCP)),
				newPod("c", 2, withContainerPort("web", 9090, "")),
				newPod("d", 3, withContainerPort("metrics", 9100, "")),
				newPod("e", 4, withContainerPort("web", 8080, corev1.ProtocolUDP)),
			},
			want: map[string][]string{
				"http:8080/TCP ": {"a", "b"},
				"http:9090/TCP ": {"c"},
				"":               {"d", "e"},
			},
		},
		{
			name: "named targetPort in a sidecar, not in a plain init container",
			svc:  named,
			pods: []*corev1.Pod{newPod("a", 0, sidecar)},
			want: map[string][]string{"http:7001/TCP ": {"a"}},
		},
		{
			name: "mixed port mappings make two slices",
			svc: ports(
				corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
				corev1.ServicePort{Name: "metrics", Port: 9090, TargetPort: intstr.FromString("metrics")},
			),
			pods: []*corev1.Pod{
				newPod("a", 0, withContainerPort("metrics", 9100, "")),
				newPod("b", 1),
				newPod("c", 2, withContainerPort("metrics", 9100, "")),
			},
			want: map[string][]string{
				"http:8080/TCP metrics:9100/TCP ": {"a", "c"},
				"http:8080/TCP ":                  {"b"},
			},
		},
		{
			name: "headless without ports",
			svc:  func(s *corev1.Service) { headless(s); s.Spec.Ports = nil },
			pods: []*corev1.Pod{newPod("a", 0)},
			want: map[string][]string{"": {"a"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ss := ForService(newService("svc", tc.svc), tc.pods)
			if d := cmp.Diff(tc.want, groups(ss)); d != "" {
				t.Errorf("pods per port set (-want +got):\n%s", d)
			}
			if len(ss) != len(tc.want) {
				t.Errorf("got %d slices, want one per port set (%d)", len(ss), len(tc.want))
			}
		})
	}
}

func TestPortFieldsCopied(t *testing.T) {
	app := "kubernetes.io/h2c"
	svc := newService("svc", ports(corev1.ServicePort{Name: "grpc", Protocol: corev1.ProtocolSCTP, AppProtocol: &app, Port: 81, TargetPort: intstr.FromInt32(9000)}))
	got := mustOne(t, ForService(svc, []*corev1.Pod{newPod("a", 0)})).Ports
	name, proto, port := "grpc", corev1.ProtocolSCTP, int32(9000)
	want := []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port, AppProtocol: &app}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
}
