// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// DeploymentProgrammed applies Istio's rule for a deployed Gateway's
// Programmed condition and status.addresses, from the Gateway's Service svc
// (nil when there is none). fqdn below is <name>.<namespace>.svc.<domain>
// of the Service, and "assigned" lists fqdn:<port> per listener port.
//
//   - gw out of scope (DeploymentScope): False/Invalid with that reason; no
//     addresses.
//   - no Service: False/AddressNotUsable, `Failed to assign to any
//     requested addresses: hostname "<fqdn>" not found`; no addresses.
//   - a Service of that name that is not ours (no ManagedLabel): as above,
//     with the message saying so.
//   - LoadBalancer with status.loadBalancer.ingress (or any Service with
//     spec.externalIPs): the IPs (type IPAddress) and hostnames (type
//     Hostname), in order, without repeats; True/Programmed "Resource
//     programmed, assigned to service(s) <assigned>".
//   - LoadBalancer without ingress: False/AddressNotAssigned "Assigned to
//     service(s) <assigned>, but failed to assign to all requested
//     addresses: address pending for hostname "<fqdn>""; no addresses (Istio
//     reports none while the load balancer is pending).
//   - ClusterIP or NodePort: the address fqdn (type Hostname, the address
//     type of Istio's class); True/Programmed.
//   - spec.addresses asks IP addresses (addresses.go) that the Service's
//     status does not show (the load balancer has not given them, or the
//     Service is not a LoadBalancer): False/AddressNotUsable naming them,
//     with the addresses it has.
//
// Listeners are served (ListenersServed) whenever the Service is ours.
// Readiness of the Deployment's pods is not considered, as in Istio.
func DeploymentProgrammed(gw *gwv1.Gateway, svc *corev1.Service, cfg ProxyConfig) ProgrammedStatus {
	if why := DeploymentScope(gw); why != "" {
		return ProgrammedStatus{Reason: gwv1.GatewayReasonInvalid, Message: why}
	}
	name := DeploymentName(gw.Name, string(gw.Spec.GatewayClassName))
	fqdn := serviceFQDN(name, gw.Namespace, cfg.ClusterDomain)
	if svc == nil {
		return ProgrammedStatus{Reason: gwv1.GatewayReasonAddressNotUsable,
			Message: fmt.Sprintf("Failed to assign to any requested addresses: hostname %q not found", fqdn)}
	}
	if _, ours := svc.Labels[ManagedLabel]; !ours {
		return ProgrammedStatus{Reason: gwv1.GatewayReasonAddressNotUsable,
			Message: fmt.Sprintf("Failed to assign to any requested addresses: Service %s/%s exists without the %s label; it is not ours and was left alone",
				gw.Namespace, name, ManagedLabel)}
	}
	var assigned []string
	for _, l := range deploymentPorts(gw) {
		assigned = append(assigned, fmt.Sprintf("%s:%d", fqdn, l.Port))
	}
	if len(assigned) == 0 {
		assigned = []string{fqdn}
	}
	var external []string
	external = append(external, svc.Spec.ExternalIPs...)
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			external = append(external, in.IP, in.Hostname)
		}
	}
	var addrs []gwv1.GatewayStatusAddress
	for _, a := range external {
		if a == "" || slices.ContainsFunc(addrs, func(x gwv1.GatewayStatusAddress) bool { return x.Value == a }) {
			continue
		}
		typ := gwv1.HostnameAddressType
		if _, err := netip.ParseAddr(a); err == nil {
			typ = gwv1.IPAddressType
		}
		addrs = append(addrs, gwv1.GatewayStatusAddress{Type: ptr.To(typ), Value: a})
	}
	if ips, _ := requestedAddresses(gw); len(ips) > 0 {
		var missing []string
		for _, ip := range ips {
			if !slices.ContainsFunc(addrs, func(a gwv1.GatewayStatusAddress) bool { return a.Value == ip.String() }) {
				missing = append(missing, ip.String())
			}
		}
		if len(missing) > 0 {
			return ProgrammedStatus{Reason: gwv1.GatewayReasonAddressNotUsable, ListenersServed: true, Addresses: addrs,
				Message: fmt.Sprintf("Assigned to service(s) %s, but the load balancer has not given it the requested address(es) %s: "+
					"a LoadBalancer Service can ask for one address (spec.loadBalancerIP, the first of spec.addresses), which must be free "+
					"and in the load balancer's pool; remove the addresses it cannot get",
					humanJoin(assigned), humanJoin(missing))}
		}
	}
	switch {
	case len(addrs) > 0:
	case svc.Spec.Type == corev1.ServiceTypeLoadBalancer:
		return ProgrammedStatus{Reason: gwv1.GatewayReasonAddressNotAssigned, ListenersServed: true,
			Message: fmt.Sprintf("Assigned to service(s) %s, but failed to assign to all requested addresses: address pending for hostname %q",
				humanJoin(assigned), fqdn)}
	default:
		addrs = []gwv1.GatewayStatusAddress{{Type: ptr.To(gwv1.HostnameAddressType), Value: fqdn}}
	}
	return ProgrammedStatus{Programmed: true, Reason: gwv1.GatewayReasonProgrammed, ListenersServed: true, Addresses: addrs,
		Message: "Resource programmed, assigned to service(s) " + humanJoin(assigned)}
}

// humanJoin joins "a", "a and b", "a, b, and c".
func humanJoin(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	case 2:
		return s[0] + " and " + s[1]
	}
	return strings.Join(s[:len(s)-1], ", ") + ", and " + s[len(s)-1]
}

// DeployedGatewayStatuses is statuses (Outputs.GatewayStatuses, computed
// with Programmed pending) with each Gateway's DeploymentProgrammed
// applied: it reads the Gateway (gateways), our view of it (ours) and its
// Service (services).
func DeployedGatewayStatuses(statuses krt.Collection[GatewayStatusResult], gateways krt.Collection[*gwv1.Gateway],
	ours krt.Collection[GatewayView], services krt.Collection[*corev1.Service], cfg ProxyConfig, opts []krt.CollectionOption,
) krt.Collection[GatewayStatusResult] {
	opts = append(slices.Clone(opts), krt.WithName("gateway/DeployedGatewayStatuses"))
	return krt.NewCollection(statuses, func(ctx krt.HandlerContext, st GatewayStatusResult) *GatewayStatusResult {
		key := st.Namespace + "/" + st.Name
		gw := krt.FetchOne(ctx, gateways, krt.FilterKey(key))
		view := krt.FetchOne(ctx, ours, krt.FilterKey(key))
		if gw == nil || view == nil {
			return &st
		}
		name := DeploymentName((*gw).Name, string((*gw).Spec.GatewayClassName))
		var svc *corev1.Service
		if s := krt.FetchOne(ctx, services, krt.FilterKey(st.Namespace+"/"+name)); s != nil {
			svc = *s
		}
		out := st
		out.Status = WithProgrammed(st.Status, view, DeploymentProgrammed(*gw, svc, cfg))
		return &out
	}, opts...)
}
