// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestConditions(t *testing.T) {
	publish := func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }
	noCondition := func(p *corev1.Pod) { p.Status.Conditions = nil }
	type conds struct{ Ready, Serving, Terminating bool }
	cases := []struct {
		name string
		pod  []func(*corev1.Pod)
		svc  []func(*corev1.Service)
		want conds
	}{
		{"ready", nil, nil, conds{true, true, false}},
		{"not ready", []func(*corev1.Pod){notReady}, nil, conds{false, false, false}},
		{"no Ready condition", []func(*corev1.Pod){noCondition}, nil, conds{false, false, false}},
		{"ready and terminating", []func(*corev1.Pod){terminating}, nil, conds{false, true, true}},
		{"not ready and terminating", []func(*corev1.Pod){notReady, terminating}, nil, conds{false, false, true}},
		{"publishNotReadyAddresses, not ready", []func(*corev1.Pod){notReady}, []func(*corev1.Service){publish}, conds{true, false, false}},
		{"publishNotReadyAddresses, terminating", []func(*corev1.Pod){terminating}, []func(*corev1.Service){publish}, conds{true, true, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOne(t, ForService(newService("svc", tc.svc...), []*corev1.Pod{newPod("p", 0, tc.pod...)}))
			if len(s.Endpoints) != 1 {
				t.Fatalf("got %d endpoints, want 1", len(s.Endpoints))
			}
			c := s.Endpoints[0].Conditions
			got := conds{*c.Ready, *c.Serving, *c.Terminating}
			if got != tc.want {
				t.Errorf("conditions = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPodSelection(t *testing.T) {
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"selected", newPod("p", 0), true},
		{"other namespace", newPod("p", 0, func(p *corev1.Pod) { p.Namespace = "other" }), false},
		{"labels do not match", newPod("p", 0, withLabels("app", "db")), false},
		{"extra labels", newPod("p", 0, withLabels("app", "web", "v", "2")), true},
		{"no IP", newPod("p", 0, withIPs()), false},
		{"only status.podIP", newPod("p", 0, func(p *corev1.Pod) { p.Status.PodIPs = nil }), true},
		{"succeeded", newPod("p", 0, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
		{"failed", newPod("p", 0, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
		{"pending with IP", newPod("p", 0, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), true},
		{"terminating", newPod("p", 0, terminating), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOne(t, ForService(newService("svc"), []*corev1.Pod{tc.pod}))
			if got := len(s.Endpoints) == 1; got != tc.want {
				t.Fatalf("pod has endpoint = %v, want %v (slice %+v)", got, tc.want, s)
			}
			if !tc.want {
				// The controller's placeholder: no ports, no endpoints.
				if s.Ports == nil || len(s.Ports) != 0 || s.Endpoints == nil {
					t.Errorf("placeholder = ports %v endpoints %v, want both empty and non-nil", s.Ports, s.Endpoints)
				}
			}
		})
	}
}

func TestEndpointFields(t *testing.T) {
	svc := newService("svc")
	pod := newPod("p", 0, func(p *corev1.Pod) {
		p.Spec.Hostname = "host-0"
		p.Spec.Subdomain = "svc"
	})
	zones := func(node string) string {
		if node == "node-1" {
			return "zone-a"
		}
		return ""
	}
	got := mustOne(t, ForServiceWithZones(svc, []*corev1.Pod{pod}, zones)).Endpoints[0]
	tr, f := true, false
	want := discoveryv1.Endpoint{
		Addresses:  []string{"10.0.0.1"},
		Conditions: discoveryv1.EndpointConditions{Ready: &tr, Serving: &tr, Terminating: &f},
		Hostname:   strp("host-0"),
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p", UID: "uid-p"},
		NodeName:   strp("node-1"),
		Zone:       strp("zone-a"),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("endpoint (-want +got):\n%s", d)
	}

	// Without zones, and with a subdomain naming another Service: no zone,
	// no hostname.
	pod.Spec.Subdomain = "other"
	got = mustOne(t, ForService(svc, []*corev1.Pod{pod})).Endpoints[0]
	if got.Zone != nil || got.Hostname != nil {
		t.Errorf("zone = %v, hostname = %v; want both nil", got.Zone, got.Hostname)
	}
}

func strp(s string) *string { return &s }

func TestAddressFamilies(t *testing.T) {
	dual := func(s *corev1.Service) {
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	type slice struct {
		Type  discoveryv1.AddressType
		Addrs []string
	}
	cases := []struct {
		name string
		svc  []func(*corev1.Service)
		pods []*corev1.Pod
		want []slice
	}{
		{
			name: "IPv6 pod, headless Service without ipFamilies",
			svc:  []func(*corev1.Service){headless},
			pods: []*corev1.Pod{newPod("p", 0, withIPs("fd00:0:0::1"))},
			want: []slice{{discoveryv1.AddressTypeIPv6, []string{"fd00::1"}}},
		},
		{
			name: "IPv6 pod, IPv6 cluster IP without ipFamilies",
			svc:  []func(*corev1.Service){func(s *corev1.Service) { s.Spec.IPFamilies, s.Spec.ClusterIP = nil, "fd00:96::a" }},
			pods: []*corev1.Pod{newPod("p", 0, withIPs("fd00::1"))},
			want: []slice{{discoveryv1.AddressTypeIPv6, []string{"fd00::1"}}},
		},
		{
			name: "dual-stack Service and pod: one slice per family",
			svc:  []func(*corev1.Service){dual},
			pods: []*corev1.Pod{newPod("p", 0, withIPs("10.0.0.1", "fd00::1"))},
			want: []slice{{discoveryv1.AddressTypeIPv4, []string{"10.0.0.1"}}, {discoveryv1.AddressTypeIPv6, []string{"fd00::1"}}},
		},
		{
			name: "dual-stack Service, IPv4 pod: IPv6 placeholder",
			svc:  []func(*corev1.Service){dual},
			pods: []*corev1.Pod{newPod("p", 0)},
			want: []slice{{discoveryv1.AddressTypeIPv4, []string{"10.0.0.1"}}, {discoveryv1.AddressTypeIPv6, nil}},
		},
		{
			name: "IPv4 Service, IPv6 pod: the pod has no endpoint",
			pods: []*corev1.Pod{newPod("p", 0, withIPs("fd00::1"))},
			want: []slice{{discoveryv1.AddressTypeIPv4, nil}},
		},
		{
			name: "headless without pods: IPv4 placeholder",
			svc:  []func(*corev1.Service){headless},
			want: []slice{{discoveryv1.AddressTypeIPv4, nil}},
		},
		{
			name: "irregular IPv4 is canonicalised",
			pods: []*corev1.Pod{newPod("p", 0, withIPs("010.000.000.001"))},
			want: []slice{{discoveryv1.AddressTypeIPv4, []string{"10.0.0.1"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []slice
			for _, s := range ForService(newService("svc", tc.svc...), tc.pods) {
				var addrs []string
				for _, e := range s.Endpoints {
					addrs = append(addrs, e.Addresses...)
				}
				got = append(got, slice{s.AddressType, addrs})
			}
			// Slices are sorted by name; compare by family.
			less := func(a, b slice) bool { return a.Type < b.Type }
			if d := cmp.Diff(tc.want, got, cmpSortSlices(less)); d != "" {
				t.Errorf("slices (-want +got):\n%s", d)
			}
		})
	}
}
