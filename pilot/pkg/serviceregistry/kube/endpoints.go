// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Labels of a pool's shadow Service, as the Gateway controller writes it
// (pilot/pkg/config/kube/gateway, ServiceSemanticsLabel). Kept here as
// literals so the registry does not depend on the controller package;
// TestShadowLabelsMatchController checks they agree.
const (
	// ServiceSemanticsLabel with value ServiceSemanticsInferencePool marks a
	// Service as an InferencePool's shadow Service.
	ServiceSemanticsLabel         = "internal.istio.io/service-semantics"
	ServiceSemanticsInferencePool = "inferencepool"
)

// ClusterName is the Envoy cluster (and EDS service) name of one Service
// port: outbound|<port>||<host>, the same string as
// pilot/pkg/networking/core.ClusterName.
func ClusterName(port int32, host string) string {
	return "outbound|" + strconv.FormatInt(int64(port), 10) + "||" + host
}

// SliceServiceKeys is the index function of EndpointSlices by Service: the
// slice's metadata.labels[kubernetes.io/service-name] as
// "<namespace>/<service>", or nothing for a slice without the label.
func SliceServiceKeys(s *discoveryv1.EndpointSlice) []string {
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		return []string{s.Namespace + "/" + name}
	}
	return nil
}

// EndpointsBuilder is the Endpoints transformation: ServiceEndpoints of a
// Service with the EndpointSlices that bySvc (SliceServiceKeys) files under
// it. Only those slices are a dependency, so a slice change recomputes only
// its own Service.
func EndpointsBuilder(bySvc krt.Index[string, *discoveryv1.EndpointSlice], clusterDomain string) krt.TransformationMulti[*corev1.Service, model.ClusterEndpoints] {
	return func(ctx krt.HandlerContext, svc *corev1.Service) []model.ClusterEndpoints {
		return ServiceEndpoints(svc, bySvc.Fetch(ctx, svc.Namespace+"/"+svc.Name), clusterDomain)
	}
}

// ServiceEndpoints returns the EDS clusters of svc, one per spec.ports entry
// in order, computed from its EndpointSlices (discovery.k8s.io/v1):
//
//   - A Service of spec.type ExternalName has none (it has no endpoints).
//     Headless Services (clusterIP None) are served like any other.
//   - Cluster outbound|<spec.ports[].port>||<name>.<namespace>.svc.<domain>.
//   - Port: the slice port whose ports[].name equals the Service port's
//     spec.ports[].name; its ports[].port is the endpoint port.
//     Exception: a shadow Service (label internal.istio.io/service-semantics
//     = inferencepool) puts on its first port's cluster the endpoints of
//     every slice port, i.e. of every pool target port, because the Endpoint
//     Picker may pick any pod:targetPort and Envoy's OverrideHost policy
//     only routes to hosts in the cluster. Its other ports' clusters are
//     computed normally.
//   - Endpoints: endpoints[] whose conditions.ready is true or unset (the
//     discovery API says consumers treat nil as ready). Kubernetes sets
//     ready false on a terminating endpoint even while it still serves
//     (conditions.serving true, conditions.terminating true), so
//     serving-but-terminating endpoints are left out: new requests go only
//     to endpoints that stay. Only addresses[0] is used (the EndpointSlice
//     controller writes exactly one; kube-proxy likewise reads only the
//     first).
//   - Address types: IPv4 and IPv6 slices whose family is in
//     spec.ipFamilies (every IP family when it is empty); FQDN slices are
//     ignored.
//   - Endpoints are sorted by address (numerically), then port, without
//     duplicates (slices may briefly overlap). A port without endpoints gets
//     a cluster with none: Envoy then answers 503 instead of waiting for EDS.
func ServiceEndpoints(svc *corev1.Service, endpointSlices []*discoveryv1.EndpointSlice, clusterDomain string) []model.ClusterEndpoints {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || len(svc.Spec.Ports) == 0 {
		return nil
	}
	host := ServiceHost(svc.Name, svc.Namespace, clusterDomain)
	shadow := svc.Labels[ServiceSemanticsLabel] == ServiceSemanticsInferencePool
	out := make([]model.ClusterEndpoints, 0, len(svc.Spec.Ports))
	for i, sp := range svc.Spec.Ports {
		everyPort := shadow && i == 0
		var eps []model.Endpoint
		for _, s := range endpointSlices {
			if !usableAddressType(svc, s.AddressType) {
				continue
			}
			for _, p := range s.Ports {
				if p.Port == nil || (!everyPort && portName(p) != sp.Name) {
					continue
				}
				eps = appendReady(eps, s.Endpoints, uint32(*p.Port))
			}
		}
		out = append(out, model.ClusterEndpoints{Cluster: ClusterName(sp.Port, host), Endpoints: sortEndpoints(eps)})
	}
	return out
}

func portName(p discoveryv1.EndpointPort) string {
	if p.Name == nil {
		return ""
	}
	return *p.Name
}

// usableAddressType: IPv4 or IPv6 slices of a family the Service has.
func usableAddressType(svc *corev1.Service, t discoveryv1.AddressType) bool {
	var family corev1.IPFamily
	switch t {
	case discoveryv1.AddressTypeIPv4:
		family = corev1.IPv4Protocol
	case discoveryv1.AddressTypeIPv6:
		family = corev1.IPv6Protocol
	default:
		return false
	}
	return len(svc.Spec.IPFamilies) == 0 || slices.Contains(svc.Spec.IPFamilies, family)
}

// Ready reports whether an endpoint receives new traffic: its
// conditions.ready is true, or unset (discovery.k8s.io/v1
// EndpointConditions: "nil should be interpreted as true").
func Ready(e discoveryv1.Endpoint) bool {
	return e.Conditions.Ready == nil || *e.Conditions.Ready
}

func appendReady(dst []model.Endpoint, eps []discoveryv1.Endpoint, port uint32) []model.Endpoint {
	for _, e := range eps {
		if Ready(e) && len(e.Addresses) > 0 {
			dst = append(dst, model.Endpoint{Address: e.Addresses[0], Port: port})
		}
	}
	return dst
}

// sortEndpoints sorts by address (as IPs, then any unparsable address as a
// string), then port, and drops duplicates. It never returns nil, so an
// empty cluster compares equal however it was computed.
func sortEndpoints(eps []model.Endpoint) []model.Endpoint {
	if len(eps) == 0 {
		return []model.Endpoint{}
	}
	slices.SortFunc(eps, func(a, b model.Endpoint) int {
		if c := compareAddress(a.Address, b.Address); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
	return slices.Compact(eps)
}

func compareAddress(a, b string) int {
	ia, errA := netip.ParseAddr(a)
	ib, errB := netip.ParseAddr(b)
	switch {
	case errA == nil && errB == nil:
		return ia.Compare(ib)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return cmp.Compare(a, b)
}
