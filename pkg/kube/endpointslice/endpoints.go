// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	utilnet "k8s.io/utils/net"
)

// selects reports whether svc's selector picks pod: same namespace, and every
// selector pair among the Pod's labels (the controller lists Pods in the
// Service's namespace with labels.Set(selector).AsSelector()).
func selects(svc *corev1.Service, pod *corev1.Pod) bool {
	if pod.Namespace != svc.Namespace {
		return false
	}
	for k, v := range svc.Spec.Selector {
		if got, ok := pod.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// eligible reports whether pod may have an endpoint at all. The controller's
// rule (ShouldPodBeInEndpoints with includeTerminating=true): a terminal Pod
// (phase Succeeded or Failed) never has one, nor does a Pod without an IP;
// a terminating Pod (deletionTimestamp set) keeps its endpoint, marked
// terminating.
func eligible(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	return pod.Status.PodIP != "" || len(pod.Status.PodIPs) > 0
}

// podReady reports whether the Pod's Ready condition is True; a Pod without
// the condition is not ready.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podAddresses returns the Pod's IPs of family at (IPv4 or IPv6), each parsed
// and printed again so irregular forms (leading zeros in IPv4) come out
// canonical, as the controller does. It reads status.podIPs, falling back to
// status.podIP when podIPs is empty (see the package doc). Unparsable IPs are
// skipped.
func podAddresses(pod *corev1.Pod, at discoveryv1.AddressType) []string {
	var out []string
	for _, s := range podIPStrings(pod) {
		ip := utilnet.ParseIPSloppy(s)
		if ip == nil {
			continue
		}
		if addressTypeOf(ip.String()) == at {
			out = append(out, ip.String())
		}
	}
	return out
}

func podIPStrings(pod *corev1.Pod) []string {
	if len(pod.Status.PodIPs) == 0 {
		if pod.Status.PodIP == "" {
			return nil
		}
		return []string{pod.Status.PodIP}
	}
	out := make([]string, len(pod.Status.PodIPs))
	for i, ip := range pod.Status.PodIPs {
		out[i] = ip.IP
	}
	return out
}

// addressTypeOf returns IPv6 for an IPv6 address, else IPv4.
func addressTypeOf(ip string) discoveryv1.AddressType {
	if utilnet.IsIPv6String(ip) {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

// podEndpoint builds pod's endpoint for svc in address family at, as the
// controller's podToEndpoint does:
//   - addresses: the Pod's IPs of that family (nil if it has none: the caller
//     then leaves the Pod out of that family's slices);
//   - serving: the Pod's Ready condition is True;
//   - terminating: metadata.deletionTimestamp is set;
//   - ready: serving and not terminating, or true whenever the Service sets
//     publishNotReadyAddresses;
//   - targetRef: the Pod (kind, namespace, name, uid); nodeName from
//     spec.nodeName when set; zone from zoneOf(nodeName) when zoneOf is non-nil
//     and returns a non-empty zone (the controller reads the Node's
//     topology.kubernetes.io/zone label);
//   - hostname: spec.hostname when the Pod's spec.subdomain names the Service
//     (same namespace).
func podEndpoint(svc *corev1.Service, pod *corev1.Pod, at discoveryv1.AddressType, zoneOf func(string) string) (discoveryv1.Endpoint, bool) {
	addrs := podAddresses(pod, at)
	if len(addrs) == 0 {
		return discoveryv1.Endpoint{}, false
	}
	serving := podReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discoveryv1.Endpoint{
		Addresses: addrs,
		Conditions: discoveryv1.EndpointConditions{
			Ready:       &ready,
			Serving:     &serving,
			Terminating: &terminating,
		},
		TargetRef: &corev1.ObjectReference{
			Kind:      "Pod",
			Namespace: pod.Namespace,
			Name:      pod.Name,
			UID:       pod.UID,
		},
	}
	if n := pod.Spec.NodeName; n != "" {
		ep.NodeName = &n
		if zoneOf != nil {
			if z := zoneOf(n); z != "" {
				ep.Zone = &z
			}
		}
	}
	if h := pod.Spec.Hostname; h != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		ep.Hostname = &h
	}
	return ep, true
}
