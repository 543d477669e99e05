// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The bootstrap's static resources and admin, as Envoy reads them at start
// (source/server/configuration_impl.cc, MainImpl::initialize: static
// clusters into the cluster manager, static listeners into the listener
// manager, added_via_api false; source/server/server.cc: the admin from
// bootstrap.admin). Whatever of them the data plane does not implement
// fails New with an error naming the field, as an unimplemented xDS field
// is NACKed; none is skipped.

// staticAllowedFields are the fields the bootstrap's static_resources and
// admin may set: every field allowed in xDS resources, plus what only our
// bootstrap uses: a listener's inline route_config, a STATIC or STRICT_DNS
// cluster's load_assignment, the ADS cluster's TCP keepalive, the admin's
// address.
var staticAllowedFields = func() map[protoreflect.FullName]bool {
	m := maps.Clone(allowedFields)
	maps.Copy(m, fieldSet(
		"envoy.config.bootstrap.v3.Bootstrap.StaticResources.listeners",
		"envoy.config.bootstrap.v3.Bootstrap.StaticResources.clusters",
		"envoy.config.bootstrap.v3.Admin.address",
		"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.route_config",
		"envoy.config.cluster.v3.Cluster.load_assignment",
		"envoy.config.cluster.v3.Cluster.upstream_connection_options",
		"envoy.config.cluster.v3.UpstreamConnectionOptions.tcp_keepalive",
		"envoy.config.core.v3.TcpKeepalive.keepalive_probes",
		"envoy.config.core.v3.TcpKeepalive.keepalive_time",
		"envoy.config.core.v3.TcpKeepalive.keepalive_interval",
	))
	return m
}()

// staticConfig is the bootstrap's static resources and admin, compiled.
type staticConfig struct {
	// listeners are the static listeners, in bootstrap order; each has
	// its inline routes.
	listeners []*listenerConfig
	// clusters are the static clusters by name, with their endpoints.
	clusters map[string]*staticCluster
	// admin is the admin interface's host:port; "" when the bootstrap has
	// no admin address (Envoy then runs no admin listener).
	admin string
}

// staticCluster is a STATIC or STRICT_DNS cluster of the bootstrap.
type staticCluster struct {
	pb  *clusterv3.Cluster
	cfg *clusterConfig
	// addrs are its endpoints, host:port (an IP for STATIC, a name that
	// is resolved when a connection is made for STRICT_DNS).
	addrs []string
}

// compileStatic checks and compiles bs's static_resources and admin.
func compileStatic(bs *bootstrapv3.Bootstrap, re regexEngine) (*staticConfig, error) {
	sr := bs.GetStaticResources()
	if err := checkImplementedIn(sr, staticAllowedFields); err != nil {
		return nil, fmt.Errorf("bootstrap: static_resources: %w", err)
	}
	sc := &staticConfig{clusters: map[string]*staticCluster{}}
	for i, c := range sr.GetClusters() {
		cc, err := compileStaticCluster(c)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: static_resources.clusters[%d] (%s): %w", i, c.GetName(), err)
		}
		if sc.clusters[c.GetName()] != nil {
			return nil, fmt.Errorf("bootstrap: static_resources.clusters[%d]: cluster name %q appears more than once", i, c.GetName())
		}
		sc.clusters[c.GetName()] = cc
	}
	seen := map[string]bool{}
	for i, l := range sr.GetListeners() {
		lc, err := compileStaticListener(l, re, sc.clusters)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: static_resources.listeners[%d] (%s): %w", i, l.GetName(), err)
		}
		if seen[lc.name] {
			return nil, fmt.Errorf("bootstrap: static_resources.listeners[%d]: listener name %q appears more than once", i, lc.name)
		}
		seen[lc.name] = true
		sc.listeners = append(sc.listeners, lc)
	}
	admin, err := compileAdmin(bs.GetAdmin())
	if err != nil {
		return nil, err
	}
	sc.admin = admin
	return sc, nil
}

// checkNameFree refuses an LDS listener or CDS cluster named as a static
// one. Envoy refuses to replace a static listener over LDS
// (ListenerManagerImpl::addOrUpdateListener) and skips a CDS cluster that
// would replace a static cluster (ClusterManagerImpl::addOrUpdateCluster);
// the data plane NACKs both (stricter).
func (sc *staticConfig) checkNameFree(typeURL, name string) error {
	taken := false
	switch typeURL {
	case resourcev3.ListenerType:
		taken = slices.ContainsFunc(sc.listeners, func(l *listenerConfig) bool { return l.name == name })
	case resourcev3.ClusterType:
		taken = sc.clusters[name] != nil
	}
	if taken {
		return fmt.Errorf("%s: the bootstrap has a static resource of this name; replacing it over xDS is not implemented", name)
	}
	return nil
}

// compileStaticListener compiles a static listener: the HCM with its
// routes inline (route_config). Envoy validates an inline route
// configuration's clusters against the clusters that exist at start
// (validate_clusters defaults to true for it, source/common/router/
// config_impl.cc), which are the static ones: a route to any other
// cluster fails the bootstrap, as in Envoy.
func compileStaticListener(l *listenerv3.Listener, re regexEngine, clusters map[string]*staticCluster) (*listenerConfig, error) {
	lc, hcm, err := compileHCMListener(l, re)
	if err != nil {
		return nil, err
	}
	rc := hcm.GetRouteConfig()
	if rc == nil {
		return nil, errors.New("a static listener's routes must be inline (route_config); rds is not implemented there")
	}
	if lc.routes, err = compileRouteTable(rc, re); err != nil {
		return nil, fmt.Errorf("route_config: %w", err)
	}
	if rc.GetValidateClusters() != nil && !rc.GetValidateClusters().GetValue() {
		return nil, errors.New("route_config.validate_clusters false not implemented")
	}
	for _, name := range lc.routes.clusterNames() {
		if clusters[name] == nil {
			return nil, fmt.Errorf("route_config: route: unknown cluster '%s' (not a static cluster)", name)
		}
	}
	if net.ParseIP(lc.address) == nil {
		return nil, fmt.Errorf("address %q is not an IP address", lc.address)
	}
	return lc, nil
}

// compileStaticCluster compiles a STATIC cluster (endpoints are IP
// addresses, source/extensions/clusters/static/static_cluster.cc) or a
// STRICT_DNS one (names, resolved by the dialer at each connection:
// Envoy re-resolves on a timer and balances over every address; the one
// we use is the ADS cluster, which carries a single long-lived stream).
func compileStaticCluster(c *clusterv3.Cluster) (*staticCluster, error) {
	switch c.GetType() {
	case clusterv3.Cluster_STATIC, clusterv3.Cluster_STRICT_DNS:
	default:
		return nil, fmt.Errorf("static cluster type %v not implemented (STATIC and STRICT_DNS only)", c.GetType())
	}
	cc, err := compileClusterCommon(c)
	if err != nil {
		return nil, err
	}
	if la := c.GetLoadAssignment(); la.GetClusterName() != "" && la.GetClusterName() != c.GetName() {
		return nil, fmt.Errorf("load_assignment.cluster_name %q differs from the cluster's name", la.GetClusterName())
	}
	addrs, err := endpointsOf(c.GetLoadAssignment())
	if err != nil {
		return nil, fmt.Errorf("load_assignment: %w", err)
	}
	for _, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		if c.GetType() == clusterv3.Cluster_STATIC && net.ParseIP(host) == nil {
			return nil, fmt.Errorf("load_assignment: STATIC cluster endpoint %q is not an IP address", host)
		}
	}
	return &staticCluster{pb: c, cfg: cc, addrs: addrs}, nil
}

// compileAdmin returns the admin's address, host:port, or "" without one
// (Envoy starts no admin listener when bootstrap.admin has no address,
// source/server/server.cc). Only the address is implemented; the field
// walk refuses the rest.
func compileAdmin(a *bootstrapv3.Admin) (string, error) {
	if err := checkImplementedIn(a, staticAllowedFields); err != nil {
		return "", fmt.Errorf("bootstrap: admin: %w", err)
	}
	if a.GetAddress() == nil {
		return "", nil
	}
	sa := a.GetAddress().GetSocketAddress()
	if sa == nil || net.ParseIP(sa.GetAddress()) == nil {
		return "", errors.New("bootstrap: admin.address must be a TCP socket address with an IP address")
	}
	return net.JoinHostPort(sa.GetAddress(), fmt.Sprint(sa.GetPortValue())), nil
}

// clusterNames are the clusters t's routes send to (route, weighted and
// mirror clusters), sorted, without duplicates.
func (t *routeTable) clusterNames() []string {
	set := map[string]bool{}
	for _, vh := range t.virtualHosts() {
		for _, r := range vh.routes {
			if r.cluster != "" {
				set[r.cluster] = true
			}
			for _, wc := range r.weighted {
				set[wc.name] = true
			}
			for _, m := range r.mirrors {
				set[m.cluster] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// virtualHosts are t's virtual hosts, each once.
func (t *routeTable) virtualHosts() []*virtualHost {
	seen := map[*virtualHost]bool{}
	var out []*virtualHost
	add := func(vh *virtualHost) {
		if vh != nil && !seen[vh] {
			seen[vh] = true
			out = append(out, vh)
		}
	}
	for _, vh := range t.exact {
		add(vh)
	}
	for _, w := range t.suffix {
		add(w.vh)
	}
	for _, w := range t.prefix {
		add(w.vh)
	}
	add(t.star)
	return out
}
