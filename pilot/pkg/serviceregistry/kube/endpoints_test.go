// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

func TestServiceEndpoints(t *testing.T) {
	const ns = "apps"
	web := service(ns, "web", svcPort("http", 80), svcPort("metrics", 9090))
	webHost := "web.apps.svc." + domain
	webSlice := func(name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return endpointSlice(ns, name, "web", map[string]int32{"http": 8080, "metrics": 9091}, eps...)
	}
	terminating := discoveryv1.Endpoint{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{
		Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}}
	unset := discoveryv1.Endpoint{Addresses: []string{"10.0.0.8"}} // conditions.ready nil: ready

	v6 := webSlice("web-v6", readyEP("fd00::2"), readyEP("fd00::1"))
	v6.AddressType = discoveryv1.AddressTypeIPv6
	fqdn := webSlice("web-fqdn", readyEP("pod.example.com"))
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	v4only := web.DeepCopy()
	v4only.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}

	externalName := service(ns, "ext")
	externalName.Spec.Type = corev1.ServiceTypeExternalName
	externalName.Spec.ExternalName = "example.com"
	externalName.Spec.Ports = []corev1.ServicePort{svcPort("http", 80)}

	cases := []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   []model.ClusterEndpoints
	}{{
		name:   "seed shadow Service: three model servers on 8000",
		svc:    shadowService(shadowName, 8000),
		slices: seedSlices()[:1],
		want: []model.ClusterEndpoints{{Cluster: "outbound|54321||" + shadowHost,
			Endpoints: eps("10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000")}},
	}, {
		name:   "seed EPP Service: unnamed port 9002",
		svc:    seed.EPPService(),
		slices: seedSlices()[1:],
		want:   []model.ClusterEndpoints{{Cluster: "outbound|9002||" + eppHost, Endpoints: eps("10.244.0.16:9002")}},
	}, {
		name: "three target ports: the first cluster has every port of every pod",
		svc:  shadowService(shadowName, 8000, 8001, 8002),
		slices: []*discoveryv1.EndpointSlice{endpointSlice(seed.Namespace, shadowName+"-a", shadowName,
			map[string]int32{"http-0": 8000, "http-1": 8001, "http-2": 8002}, podIPs(13, 14)...)},
		want: []model.ClusterEndpoints{
			{Cluster: "outbound|54321||" + shadowHost, Endpoints: eps(
				"10.244.0.13:8000", "10.244.0.13:8001", "10.244.0.13:8002",
				"10.244.0.14:8000", "10.244.0.14:8001", "10.244.0.14:8002")},
			{Cluster: "outbound|54322||" + shadowHost, Endpoints: eps("10.244.0.13:8001", "10.244.0.14:8001")},
			{Cluster: "outbound|54323||" + shadowHost, Endpoints: eps("10.244.0.13:8002", "10.244.0.14:8002")},
		},
	}, {
		name:   "not ready and terminating endpoints are left out; unset ready counts",
		svc:    web,
		slices: []*discoveryv1.EndpointSlice{webSlice("web-a", readyEP("10.0.0.1"), notReadyEP("10.0.0.2"), terminating, unset)},
		want: []model.ClusterEndpoints{
			{Cluster: "outbound|80||" + webHost, Endpoints: eps("10.0.0.1:8080", "10.0.0.8:8080")},
			{Cluster: "outbound|9090||" + webHost, Endpoints: eps("10.0.0.1:9091", "10.0.0.8:9091")},
		},
	}, {
		name: "slices merged, sorted numerically, duplicates dropped",
		svc:  web,
		slices: []*discoveryv1.EndpointSlice{
			webSlice("web-a", readyEP("10.0.0.10"), readyEP("10.0.0.9")),
			webSlice("web-b", readyEP("10.0.0.9"), readyEP("10.0.0.2")),
		},
		want: []model.ClusterEndpoints{
			{Cluster: "outbound|80||" + webHost, Endpoints: eps("10.0.0.2:8080", "10.0.0.9:8080", "10.0.0.10:8080")},
			{Cluster: "outbound|9090||" + webHost, Endpoints: eps("10.0.0.2:9091", "10.0.0.9:9091", "10.0.0.10:9091")},
		},
	}, {
		name:   "IPv6 slices count; FQDN slices do not",
		svc:    web,
		slices: []*discoveryv1.EndpointSlice{webSlice("web-a", readyEP("10.0.0.1")), v6, fqdn},
		want: []model.ClusterEndpoints{
			{Cluster: "outbound|80||" + webHost, Endpoints: eps("10.0.0.1:8080", "[fd00::1]:8080", "[fd00::2]:8080")},
			{Cluster: "outbound|9090||" + webHost, Endpoints: eps("10.0.0.1:9091", "[fd00::1]:9091", "[fd00::2]:9091")},
		},
	}, {
		name:   "only the Service's IP families",
		svc:    v4only,
		slices: []*discoveryv1.EndpointSlice{webSlice("web-a", readyEP("10.0.0.1")), v6},
		want: []model.ClusterEndpoints{
			{Cluster: "outbound|80||" + webHost, Endpoints: eps("10.0.0.1:8080")},
			{Cluster: "outbound|9090||" + webHost, Endpoints: eps("10.0.0.1:9091")},
		},
	}, {
		name: "a slice port without a matching Service port name is not used",
		svc:  service(ns, "web", svcPort("http", 80)),
		slices: []*discoveryv1.EndpointSlice{endpointSlice(ns, "web-a", "web", map[string]int32{"grpc": 9000},
			readyEP("10.0.0.1"))},
		want: []model.ClusterEndpoints{{Cluster: "outbound|80||" + webHost, Endpoints: eps()}},
	}, {
		name: "no slices: one empty cluster per port",
		svc:  web,
		want: []model.ClusterEndpoints{
			{Cluster: "outbound|80||" + webHost, Endpoints: eps()},
			{Cluster: "outbound|9090||" + webHost, Endpoints: eps()},
		},
	}, {
		name:   "ExternalName: no clusters",
		svc:    externalName,
		slices: []*discoveryv1.EndpointSlice{endpointSlice(ns, "ext-a", "ext", map[string]int32{"http": 80}, readyEP("10.0.0.1"))},
	}, {
		name: "no ports: no clusters",
		svc:  service(ns, "none"),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ServiceEndpoints(tc.svc, tc.slices, domain)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ServiceEndpoints (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSliceServiceKeys(t *testing.T) {
	s := endpointSlice("apps", "web-a", "web", nil)
	if got := SliceServiceKeys(s); !cmp.Equal(got, []string{"apps/web"}) {
		t.Errorf("keys = %v, want [apps/web]", got)
	}
	delete(s.Labels, discoveryv1.LabelServiceName)
	if got := SliceServiceKeys(s); got != nil {
		t.Errorf("unlabelled slice: keys = %v, want none", got)
	}
}

// The registry and the translator must spell cluster names the same way.
func TestClusterNameMatchesTranslator(t *testing.T) {
	for _, port := range []int32{1, 9002, 54321, 65535} {
		if got, want := ClusterName(port, shadowHost), core.ClusterName(uint32(port), shadowHost); got != want {
			t.Errorf("ClusterName(%d) = %q, core says %q", port, got, want)
		}
	}
}
