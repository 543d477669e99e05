// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// MaxEndpointsPerSlice is the most endpoints one computed slice holds: the
	// default of kube-controller-manager's --max-endpoints-per-slice.
	MaxEndpointsPerSlice = 100
	// ControllerName is the value of the endpointslice.kubernetes.io/managed-by
	// label on computed slices: the name the Kubernetes EndpointSlice controller
	// uses, since computed slices stand in for its.
	ControllerName = "endpointslice-controller.k8s.io"
)

// ForService returns the EndpointSlices the Kubernetes EndpointSlice
// controller would maintain for svc given pods. pods may be any Pods:
// ForService keeps those in svc's namespace whose labels match
// svc.Spec.Selector. It returns nil for a Service without a selector (its
// slices are written by someone else) and for an ExternalName Service, as the
// controller does.
//
// The result holds, per address type of the Service and per distinct
// resolved port set, the endpoints of the eligible Pods in slices of at most
// MaxEndpointsPerSlice, sorted by Pod name; an address type without any
// endpoint gets one empty placeholder slice (no ports, no endpoints), as the
// controller creates. Slices are sorted by name. Names are deterministic
// ("<service>-<8 hex digits>") and differ from a cluster's, where they are
// random; the package doc lists every difference from the controller.
//
// The result is new memory; svc and pods are not modified.
func ForService(svc *corev1.Service, pods []*corev1.Pod) []*discoveryv1.EndpointSlice {
	return ForServiceWithZones(svc, pods, nil)
}

// ForServiceWithZones is ForService, setting each endpoint's zone to
// zoneOf(pod's spec.nodeName) when that is non-empty: the controller copies the
// Node's topology.kubernetes.io/zone label. A nil zoneOf sets no zones.
func ForServiceWithZones(svc *corev1.Service, pods []*corev1.Pod, zoneOf func(nodeName string) string) []*discoveryv1.EndpointSlice {
	// The controller skips ExternalName Services and Services without a
	// selector (their endpoints come from elsewhere).
	if svc.Spec.Type == corev1.ServiceTypeExternalName || len(svc.Spec.Selector) == 0 {
		return nil
	}
	var selected []*corev1.Pod
	for _, p := range pods {
		if p != nil && selects(svc, p) && eligible(p) {
			selected = append(selected, p)
		}
	}
	slices.SortFunc(selected, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })

	b := builder{svc: svc, names: map[string]bool{}}
	for _, at := range addressTypes(svc, selected) {
		b.addressType(at, selected, zoneOf)
	}
	slices.SortFunc(b.out, func(x, y *discoveryv1.EndpointSlice) int { return cmp.Compare(x.Name, y.Name) })
	return b.out
}

// addressTypes returns the address types svc gets slices for, IPv4 before
// IPv6. The controller's rule (getAddressTypesForService): the families of
// spec.ipFamilies; without them, the family of a set spec.clusterIP. For a
// Service with neither, see the package doc: the families of the selected
// Pods' IPs, or IPv4 when they have none.
func addressTypes(svc *corev1.Service, pods []*corev1.Pod) []discoveryv1.AddressType {
	var v4, v6 bool
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			v4 = true
		case corev1.IPv6Protocol:
			v6 = true
		}
	}
	if !v4 && !v6 && isServiceIPSet(svc) {
		v6 = addressTypeOf(svc.Spec.ClusterIP) == discoveryv1.AddressTypeIPv6
		v4 = !v6
	}
	if !v4 && !v6 {
		for _, p := range pods {
			for _, ip := range podIPStrings(p) {
				if addressTypeOf(ip) == discoveryv1.AddressTypeIPv6 {
					v6 = true
				} else {
					v4 = true
				}
			}
		}
		v4 = v4 || !v6
	}
	var out []discoveryv1.AddressType
	if v4 {
		out = append(out, discoveryv1.AddressTypeIPv4)
	}
	if v6 {
		out = append(out, discoveryv1.AddressTypeIPv6)
	}
	return out
}

// isServiceIPSet reports whether svc has a cluster IP (set, and not "None").
func isServiceIPSet(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// builder accumulates one Service's slices.
type builder struct {
	svc   *corev1.Service
	names map[string]bool
	out   []*discoveryv1.EndpointSlice
}

// portGroup is the endpoints of the Pods sharing one port mapping.
type portGroup struct {
	key       string
	ports     []discoveryv1.EndpointPort
	endpoints []discoveryv1.Endpoint
}

// addressType adds the slices of address type at. The controller's rule
// (reconcileByAddressType): Pods are grouped by their resolved port set; a Pod
// without an IP of this family adds no endpoint; each group is cut into
// slices of at most MaxEndpointsPerSlice; when no slice results, one
// placeholder slice with empty ports and endpoints stands for the Service.
func (b *builder) addressType(at discoveryv1.AddressType, pods []*corev1.Pod, zoneOf func(string) string) {
	var groups []*portGroup
	byKey := map[string]*portGroup{}
	for _, p := range pods {
		ep, ok := podEndpoint(b.svc, p, at, zoneOf)
		if !ok {
			continue
		}
		ports := endpointPorts(b.svc, p)
		k := portKey(ports)
		g := byKey[k]
		if g == nil {
			g = &portGroup{key: k, ports: ports}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.endpoints = append(g.endpoints, ep)
	}
	if len(groups) == 0 {
		b.add(at, "", 0, []discoveryv1.EndpointPort{}, []discoveryv1.Endpoint{})
		return
	}
	slices.SortFunc(groups, func(x, y *portGroup) int { return cmp.Compare(x.key, y.key) })
	for _, g := range groups {
		for i := 0; i*MaxEndpointsPerSlice < len(g.endpoints); i++ {
			chunk := g.endpoints[i*MaxEndpointsPerSlice : min((i+1)*MaxEndpointsPerSlice, len(g.endpoints))]
			// Each slice gets its own copy of the ports: slices are separate
			// objects downstream.
			b.add(at, g.key, i, slices.Clone(g.ports), slices.Clip(chunk))
		}
	}
}

// add appends one slice. Its metadata follows the controller's
// newEndpointSlice and setEndpointSliceLabels:
//   - namespace of the Service; name "<service>-" plus a hash of (address
//     type, port set, chunk index), rehashed on the unlikely collision;
//   - labels: the Service's labels except the reserved ones, then
//     kubernetes.io/service-name=<service>,
//     endpointslice.kubernetes.io/managed-by=ControllerName, and
//     service.kubernetes.io/headless="" when the Service has no cluster IP;
//   - a controller owner reference to the Service (v1 Service, name, uid).
func (b *builder) add(at discoveryv1.AddressType, key string, chunk int, ports []discoveryv1.EndpointPort, eps []discoveryv1.Endpoint) {
	name := ""
	for salt := 0; name == "" || b.names[name]; salt++ {
		name = sliceName(b.svc.Name, string(at)+"\x00"+key+"\x00"+strconv.Itoa(chunk)+"\x00"+strconv.Itoa(salt))
	}
	b.names[name] = true
	b.out = append(b.out, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       b.svc.Namespace,
			Labels:          sliceLabels(b.svc),
			OwnerReferences: []metav1.OwnerReference{ownerRef(b.svc)},
		},
		AddressType: at,
		Endpoints:   eps,
		Ports:       ports,
	})
}

// sliceName is "<service>-" (the controller's generateName prefix) plus 8 hex
// digits of FNV-1a over seed. Service names are at most 63 characters, so
// the name is always a valid DNS subdomain.
func sliceName(service, seed string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(seed))
	const hexDigits = "0123456789abcdef"
	sum := h.Sum32()
	buf := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		buf[i] = hexDigits[sum&0xf]
		sum >>= 4
	}
	return service + "-" + string(buf)
}

// sliceLabels returns the labels of svc's slices (see add).
func sliceLabels(svc *corev1.Service) map[string]string {
	out := make(map[string]string, len(svc.Labels)+3)
	for k, v := range svc.Labels {
		if k == discoveryv1.LabelServiceName || k == discoveryv1.LabelManagedBy || k == corev1.IsHeadlessService {
			continue
		}
		out[k] = v
	}
	if !isServiceIPSet(svc) {
		out[corev1.IsHeadlessService] = ""
	}
	out[discoveryv1.LabelServiceName] = svc.Name
	out[discoveryv1.LabelManagedBy] = ControllerName
	return out
}

// ownerRef is the controller reference the EndpointSlice controller sets
// (metav1.NewControllerRef with group/version/kind v1 Service).
func ownerRef(svc *corev1.Service) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion:         "v1",
		Kind:               "Service",
		Name:               svc.Name,
		UID:                svc.UID,
		Controller:         &t,
		BlockOwnerDeletion: &t,
	}
}
