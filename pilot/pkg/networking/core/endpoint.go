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
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: cluster}
	if len(eps) == 0 {
		return cla
	}
	// Parse every address once, not in every comparison.
	sorted := make([]sortableEndpoint, len(eps))
	for i, e := range eps {
		ip, err := netip.ParseAddr(e.Address)
		sorted[i] = sortableEndpoint{Endpoint: e, ip: ip, isIP: err == nil}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].less(sorted[j]) })
	n := 1
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Endpoint != sorted[i-1].Endpoint {
			n++
		}
	}
	// One allocation per message type for the whole assignment.
	lbs := make([]endpointv3.LbEndpoint, n)
	hosts := make([]endpointv3.LbEndpoint_Endpoint, n)
	endpoints := make([]endpointv3.Endpoint, n)
	addrs := make([]corev3.Address, n)
	sockets := make([]corev3.Address_SocketAddress, n)
	socketAddrs := make([]corev3.SocketAddress, n)
	ports := make([]corev3.SocketAddress_PortValue, n)
	loc := &endpointv3.LocalityLbEndpoints{LbEndpoints: make([]*endpointv3.LbEndpoint, 0, n)}
	for i, e := range sorted {
		if i > 0 && e.Endpoint == sorted[i-1].Endpoint {
			continue
		}
		k := len(loc.LbEndpoints)
		ports[k].PortValue = e.Port
		socketAddrs[k].Address, socketAddrs[k].PortSpecifier = e.Address, &ports[k]
		sockets[k].SocketAddress = &socketAddrs[k]
		addrs[k].Address = &sockets[k]
		endpoints[k].Address = &addrs[k]
		hosts[k].Endpoint = &endpoints[k]
		lbs[k].HostIdentifier, lbs[k].HealthStatus = &hosts[k], corev3.HealthStatus_HEALTHY
		loc.LbEndpoints = append(loc.LbEndpoints, &lbs[k])
	}
	cla.Endpoints = []*endpointv3.LocalityLbEndpoints{loc}
	return cla
}

// sortableEndpoint is an Endpoint with its address parsed, for sorting.
type sortableEndpoint struct {
	Endpoint
	ip   netip.Addr
	isIP bool
}

// less orders by address (numerically when both are IPs, IPv4 first; else
// as strings) then port.
func (a sortableEndpoint) less(b sortableEndpoint) bool {
	if a.Address != b.Address {
		if a.isIP && b.isIP {
			return a.ip.Less(b.ip)
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
