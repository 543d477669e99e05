// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// protocolOrTCP returns p, or TCP when p is empty (the API server's default
// for Service and container ports; manifests in file mode are not defaulted).
func protocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// resolvePort returns the port number that sp's targetPort names on pod, and
// false when it names none. The controller's rule (FindPort):
//   - an integer targetPort is used as is; an unset one (0) means the Service
//     port itself, which is what the API server defaults it to;
//   - a named targetPort is the containerPort of the first port with that name
//     and the Service port's protocol, searched in spec.containers, then in
//     sidecar containers (spec.initContainers with restartPolicy Always).
func resolvePort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	tp := sp.TargetPort
	if tp.Type == intstr.Int {
		if tp.IntVal == 0 {
			return sp.Port, true
		}
		return tp.IntVal, true
	}
	if tp.StrVal == "" {
		return sp.Port, true
	}
	proto := protocolOrTCP(sp.Protocol)
	find := func(cs []corev1.Container, sidecarsOnly bool) (int32, bool) {
		for i := range cs {
			c := &cs[i]
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range c.Ports {
				if p.Name == tp.StrVal && protocolOrTCP(p.Protocol) == proto {
					return p.ContainerPort, true
				}
			}
		}
		return 0, false
	}
	if n, ok := find(pod.Spec.Containers, false); ok {
		return n, true
	}
	return find(pod.Spec.InitContainers, true)
}

// endpointPorts returns pod's port mapping for svc, in the order of the
// Service's ports. The controller's rule (getEndpointPorts): each Service
// port whose targetPort resolves on the Pod becomes an EndpointPort with the
// Service port's name, protocol and appProtocol and the resolved number; a
// port that does not resolve is left out of this Pod's mapping (the Pod keeps
// its endpoint, under a smaller port set). A headless Service without ports
// gets an empty mapping.
func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(svc.Spec.Ports))
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		n, ok := resolvePort(pod, sp)
		if !ok {
			continue
		}
		name, proto, num := sp.Name, protocolOrTCP(sp.Protocol), n
		ep := discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &num}
		if sp.AppProtocol != nil {
			ap := *sp.AppProtocol
			ep.AppProtocol = &ap
		}
		out = append(out, ep)
	}
	return out
}

// portKey is a canonical string for a port mapping: Pods with equal keys
// share slices (the controller groups by a hash of the sorted ports,
// NewPortMapKey). Mappings built by endpointPorts are in Service port order,
// so equal sets give equal keys without sorting.
func portKey(ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		b.WriteString(*p.Name)
		b.WriteByte('/')
		b.WriteString(string(*p.Protocol))
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(int(*p.Port)))
		b.WriteByte('/')
		if p.AppProtocol != nil {
			b.WriteString(*p.AppProtocol)
		}
		b.WriteByte(';')
	}
	return b.String()
}
