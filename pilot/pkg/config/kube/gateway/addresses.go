// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"net/netip"

	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Static addresses (Gateway spec.addresses, GatewayStaticAddresses): an
// address of type IPAddress (the default type) is asked of the load
// balancer through the Gateway's Service (spec.loadBalancerIP), and the
// Gateway is Programmed only once the load balancer has given it every
// address asked for. Any other type (Hostname, or an implementation's
// own) cannot be asked of a Service: the Gateway is Accepted=False with
// reason UnsupportedAddress and gets no deployment.

// requestedAddresses are the IP addresses of spec.addresses, in order,
// and why the Gateway's addresses cannot be used ("" when they can).
func requestedAddresses(gw *gwv1.Gateway) ([]netip.Addr, string) {
	var out []netip.Addr
	for i, a := range gw.Spec.Addresses {
		typ := ptr.Deref(a.Type, gwv1.IPAddressType)
		if typ != gwv1.IPAddressType {
			return nil, fmt.Sprintf("spec.addresses[%d] %q: type %q is not supported; only IPAddress addresses can be asked of the Gateway's load balancer",
				i, a.Value, typ)
		}
		ip, err := netip.ParseAddr(a.Value)
		if err != nil {
			return nil, fmt.Sprintf("spec.addresses[%d] %q: not an IP address", i, a.Value)
		}
		out = append(out, ip)
	}
	return out, ""
}

// gatewayAddressProblem is why the Gateway's spec.addresses cannot be
// used (Accepted=False/UnsupportedAddress), "" when they can.
func gatewayAddressProblem(gw *gwv1.Gateway) string {
	_, problem := requestedAddresses(gw)
	return problem
}
