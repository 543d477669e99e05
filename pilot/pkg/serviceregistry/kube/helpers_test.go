// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// Names of the seed scenario's Services as the registry sees them.
const (
	domain     = "cluster.local"
	shadowName = "vllm-llama3-8b-ip-22dc7de1"
	shadowHost = shadowName + "." + seed.Namespace + ".svc." + domain
	eppHost    = seed.EPPName + "." + seed.Namespace + ".svc." + domain
)

// shadowService is a pool's shadow Service as the controller writes it:
// headless, labelled, port 54321+i to each target port, named http-<i>.
func shadowService(name string, targetPorts ...int32) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: name, Labels: map[string]string{
			"istio.io/inferencepool-name": seed.PoolName,
			ServiceSemanticsLabel:         ServiceSemanticsInferencePool,
		}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": seed.PoolName}},
	}
	for i, p := range targetPorts {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{
			Name: fmt.Sprintf("http-%d", i), Protocol: corev1.ProtocolTCP,
			Port: int32(54321 + i), TargetPort: intstr.FromInt32(p),
		})
	}
	return s
}

// service is an ordinary ClusterIP Service with the given ports.
func service(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: ports},
	}
}

func svcPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port}
}

// endpointSlice is an IPv4 slice of Service svc named name, with the given
// ports (name:number) and endpoints.
func endpointSlice(ns, name, svc string, ports map[string]int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
	}
	for n, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(n), Port: ptr.To(p), Protocol: ptr.To(corev1.ProtocolTCP)})
	}
	return s
}

// readyEP is a ready endpoint; notReady one with ready false.
func readyEP(addr string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
}

func notReadyEP(addr string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}
}

// podIPs are ready endpoints 10.244.0.<first>..<last>.
func podIPs(first, last int) []discoveryv1.Endpoint {
	var out []discoveryv1.Endpoint
	for i := first; i <= last; i++ {
		out = append(out, readyEP(fmt.Sprintf("10.244.0.%d", i)))
	}
	return out
}

// seedSlices are the seed's EndpointSlices: the three model servers on
// 8000 behind the shadow Service, the EPP on 9002.
func seedSlices() []*discoveryv1.EndpointSlice {
	return []*discoveryv1.EndpointSlice{
		endpointSlice(seed.Namespace, shadowName+"-abcde", shadowName, map[string]int32{"http-0": 8000}, podIPs(13, 15)...),
		endpointSlice(seed.Namespace, seed.EPPName+"-fghij", seed.EPPName, map[string]int32{"": seed.EPPPort}, readyEP("10.244.0.16")),
	}
}

// eps builds endpoints from "ip:port" strings ("[v6]:port" for IPv6).
func eps(addrs ...string) []model.Endpoint {
	out := []model.Endpoint{}
	for _, a := range addrs {
		ap := netip.MustParseAddrPort(a)
		out = append(out, model.Endpoint{Address: ap.Addr().String(), Port: uint32(ap.Port())})
	}
	return out
}
