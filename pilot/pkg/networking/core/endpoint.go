// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"net/netip"
	"sort"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
)

// BuildEndpoints returns a ClusterLoadAssignment for every EDS cluster in
// clusters, sorted by cluster name. cluster_name is the cluster's
// eds_cluster_config.service_name (or its name). Its endpoints are
// in.Endpoints[name], every one as given (the caller passes only ready
// ones), with health_status HEALTHY, in one locality, sorted by address
// (IPs numerically, IPv4 first) then port, duplicates removed. A cluster
// without endpoints gets an empty assignment, so Envoy does not wait for
// one while warming it.
func BuildEndpoints(clusters []*clusterv3.Cluster, in Inputs) []*endpointv3.ClusterLoadAssignment {
	var out []*endpointv3.ClusterLoadAssignment
	for _, c := range clusters {
		if c.GetType() != clusterv3.Cluster_EDS {
			continue
		}
		name := edsServiceName(c)
		out = append(out, BuildClusterLoadAssignment(name, in.Endpoints[name]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClusterName < out[j].ClusterName })
	return out
}

// BuildClusterLoadAssignment is the assignment of one EDS cluster; see
// BuildEndpoints. It does not modify eps.
func BuildClusterLoadAssignment(cluster string, eps []Endpoint) *endpointv3.ClusterLoadAssignment {
	sorted := append([]Endpoint(nil), eps...)
	sort.Slice(sorted, func(i, j int) bool { return endpointLess(sorted[i], sorted[j]) })
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: cluster}
	if len(sorted) == 0 {
		return cla
	}
	loc := &endpointv3.LocalityLbEndpoints{}
	for i, e := range sorted {
		if i > 0 && e == sorted[i-1] {
			continue
		}
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address:       e.Address,
					PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: e.Port},
				}}},
			}},
			HealthStatus: corev3.HealthStatus_HEALTHY,
		})
	}
	cla.Endpoints = []*endpointv3.LocalityLbEndpoints{loc}
	return cla
}

func endpointLess(a, b Endpoint) bool {
	if a.Address != b.Address {
		ia, ea := netip.ParseAddr(a.Address)
		ib, eb := netip.ParseAddr(b.Address)
		if ea == nil && eb == nil {
			return ia.Less(ib)
		}
		return a.Address < b.Address
	}
	return a.Port < b.Port
}

// edsServiceName is the name EDS knows a cluster by.
func edsServiceName(c *clusterv3.Cluster) string {
	if n := c.GetEdsClusterConfig().GetServiceName(); n != "" {
		return n
	}
	return c.GetName()
}
