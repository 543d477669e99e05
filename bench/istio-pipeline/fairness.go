// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"fmt"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	overridehostv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
)

const extProcFilter = "envoy.filters.http.ext_proc"

// GatewayView is what one Gateway's proxy received, reduced to what both
// control planes must agree on: per pool its routes, its cluster and its
// endpoints, with the inference fields (the ext_proc per-route override
// to the pool's EPP, the override_host policy), and the EPP's cluster.
// Cluster names are replaced by the pool they serve ("pool:NAME") or
// "epp"; anything a side sends beyond the Gateway's pools (Istio sends a
// Gateway every Service's cluster by default) is not part of the view.
type GatewayView struct {
	// ExtProcFilter is whether the listener's HTTP filters hold the ext_proc
	// filter the per-route overrides configure.
	ExtProcFilter bool
	EPP           ClusterView
	Pools         map[string]PoolView
}

// PoolView is one pool as its Gateway's proxy sees it.
type PoolView struct {
	Routes    []RouteView // the routes of the pool host's virtual host
	Cluster   ClusterView
	Endpoints []string // address:port Envoy routes to, sorted
}

// RouteView is one route: its match, where it sends, and its ext_proc
// per-route override.
type RouteView struct {
	Match   string
	Cluster string
	ExtProc string // "EPP cluster, failure_mode_allow=..., modes" or "" without override
}

// ClusterView is a cluster's discovery type and load-balancing policy.
type ClusterView struct {
	Present bool
	Type    string
	// OverrideHost is the override_host policy's sources and selected host
	// key ("" when the cluster has no such policy).
	OverrideHost string
	Endpoints    []string
}

// View reduces what r's proxy of Gateway gw holds.
func (r *Run) View(gw string) (GatewayView, error) {
	c := r.clients[gw]
	c.mu.Lock()
	defer c.mu.Unlock()
	names := map[string]string{EPPCluster(): "epp"}
	for _, p := range r.In.Pool {
		names[p.Cluster] = "pool:" + p.Name
	}
	norm := func(cluster string) string {
		if n, ok := names[cluster]; ok {
			return n
		}
		return "other:" + cluster
	}
	v := GatewayView{Pools: map[string]PoolView{}}
	for name := range c.resources[typeLDS] {
		m, err := c.get(typeLDS, name, func() proto.Message { return &listenerv3.Listener{} })
		if err != nil {
			return v, err
		}
		has, err := hasExtProc(m.(*listenerv3.Listener))
		if err != nil {
			return v, err
		}
		v.ExtProcFilter = v.ExtProcFilter || has
	}
	var err error
	if v.EPP, err = c.clusterView(EPPCluster()); err != nil {
		return v, err
	}
	rc, err := c.get(typeRDS, routeConfig, func() proto.Message { return &routev3.RouteConfiguration{} })
	if err != nil {
		return v, err
	}
	hosts := map[string]*routev3.VirtualHost{}
	if rc != nil {
		for _, vh := range rc.(*routev3.RouteConfiguration).GetVirtualHosts() {
			for _, d := range vh.GetDomains() {
				hosts[hostOf(d)] = vh
			}
		}
	}
	for _, p := range r.In.PoolsOf(gw) {
		pv := PoolView{}
		if vh := hosts[p.Host]; vh != nil {
			for _, rt := range vh.GetRoutes() {
				rv, err := routeView(rt, norm)
				if err != nil {
					return v, fmt.Errorf("pool %s: %v", p.Name, err)
				}
				pv.Routes = append(pv.Routes, rv)
			}
		}
		if pv.Cluster, err = c.clusterView(p.Cluster); err != nil {
			return v, err
		}
		pv.Endpoints = pv.Cluster.Endpoints
		pv.Cluster.Endpoints = nil
		v.Pools[p.Name] = pv
	}
	return v, nil
}

func hasExtProc(l *listenerv3.Listener) (bool, error) {
	for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
		for _, f := range fc.GetFilters() {
			hcm := &hcmv3.HttpConnectionManager{}
			if f.GetTypedConfig().MessageIs(hcm) {
				if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
					return false, err
				}
				for _, hf := range hcm.GetHttpFilters() {
					if hf.GetName() == extProcFilter {
						return true, nil
					}
				}
			}
		}
	}
	return false, nil
}

func routeView(rt *routev3.Route, norm func(string) string) (RouteView, error) {
	rv := RouteView{Match: matchString(rt.GetMatch())}
	switch a := rt.GetAction().(type) {
	case *routev3.Route_Route:
		if cl := a.Route.GetCluster(); cl != "" {
			rv.Cluster = norm(cl)
		} else if wc := a.Route.GetWeightedClusters(); wc != nil {
			var parts []string
			for _, w := range wc.GetClusters() {
				parts = append(parts, fmt.Sprintf("%s=%d", norm(w.GetName()), w.GetWeight().GetValue()))
			}
			// One backend at full weight is the same route as a plain
			// cluster.
			if len(parts) == 1 {
				rv.Cluster = norm(wc.GetClusters()[0].GetName())
			} else {
				rv.Cluster = strings.Join(parts, ",")
			}
		}
	default:
		rv.Cluster = fmt.Sprintf("%T", a)
	}
	if a := rt.GetTypedPerFilterConfig()[extProcFilter]; a != nil {
		pr := &extprocv3.ExtProcPerRoute{}
		if err := a.UnmarshalTo(pr); err != nil {
			return rv, err
		}
		o := pr.GetOverrides()
		if o == nil {
			rv.ExtProc = fmt.Sprintf("disabled=%v", pr.GetDisabled())
		} else {
			pm := o.GetProcessingMode()
			rv.ExtProc = fmt.Sprintf("%s failure_mode_allow=%v request_body=%v response_body=%v",
				norm(o.GetGrpcService().GetEnvoyGrpc().GetClusterName()), o.GetFailureModeAllow().GetValue(),
				pm.GetRequestBodyMode(), pm.GetResponseBodyMode())
		}
	}
	return rv, nil
}

func matchString(m *routev3.RouteMatch) string {
	var s string
	switch p := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		s = "prefix " + p.Prefix
	case *routev3.RouteMatch_Path:
		s = "path " + p.Path
	case *routev3.RouteMatch_PathSeparatedPrefix:
		// "/" as a path-separated prefix matches what prefix "/" matches.
		s = "prefix " + p.PathSeparatedPrefix
	case *routev3.RouteMatch_SafeRegex:
		s = "regex " + p.SafeRegex.GetRegex()
	default:
		s = fmt.Sprintf("%T", p)
	}
	for _, h := range m.GetHeaders() {
		s += " header " + h.GetName()
	}
	return s
}

// clusterView reduces cluster name and its assignment. Callers hold c.mu.
func (c *adsClient) clusterView(name string) (ClusterView, error) {
	m, err := c.get(typeCDS, name, func() proto.Message { return &clusterv3.Cluster{} })
	if err != nil || m == nil {
		return ClusterView{}, err
	}
	cl := m.(*clusterv3.Cluster)
	v := ClusterView{Present: true, Type: cl.GetType().String()}
	for _, p := range cl.GetLoadBalancingPolicy().GetPolicies() {
		oh := &overridehostv3.OverrideHost{}
		if tc := p.GetTypedExtensionConfig().GetTypedConfig(); tc.MessageIs(oh) {
			if err := tc.UnmarshalTo(oh); err != nil {
				return v, err
			}
			var srcs []string
			for _, s := range oh.GetOverrideHostSources() {
				srcs = append(srcs, metadataKey(s.GetMetadata().GetKey(), s.GetMetadata().GetPath()))
			}
			v.OverrideHost = fmt.Sprintf("sources=%s selected=%s", strings.Join(srcs, ","),
				metadataKey(oh.GetSelectedHostKey().GetKey(), oh.GetSelectedHostKey().GetPath()))
		}
	}
	eds := cl.GetEdsClusterConfig().GetServiceName()
	if eds == "" {
		eds = name
	}
	cla, err := c.get(typeEDS, eds, func() proto.Message { return &endpointv3.ClusterLoadAssignment{} })
	if err != nil {
		return v, err
	}
	if cla != nil {
		v.Endpoints = healthy(cla.(*endpointv3.ClusterLoadAssignment))
	}
	return v, nil
}

type pathSegment interface{ GetKey() string }

func metadataKey[S pathSegment](key string, path []S) string {
	s := key
	for _, p := range path {
		s += "/" + p.GetKey()
	}
	return s
}

// CompareViews returns the differences between two sides' views of every
// Gateway, one line per pool or field that differs; empty when they agree.
func CompareViews(a, b *Run) ([]string, error) {
	var diffs []string
	for _, gw := range a.In.GatewayNames {
		va, err := a.View(gw)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", a.Side.Name, err)
		}
		vb, err := b.View(gw)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", b.Side.Name, err)
		}
		if va.ExtProcFilter != vb.ExtProcFilter {
			diffs = append(diffs, fmt.Sprintf("gateway %s: ext_proc filter in the listener: %s %v, %s %v", gw, a.Side.Name, va.ExtProcFilter, b.Side.Name, vb.ExtProcFilter))
		}
		if d := cmp.Diff(va.EPP, vb.EPP); d != "" {
			diffs = append(diffs, fmt.Sprintf("gateway %s: EPP cluster (-%s +%s):\n%s", gw, a.Side.Name, b.Side.Name, d))
		}
		pools := sortedKeys(va.Pools)
		for _, p := range sortedKeys(vb.Pools) {
			if _, ok := va.Pools[p]; !ok {
				pools = append(pools, p)
			}
		}
		slices.Sort(pools)
		for _, p := range pools {
			if d := cmp.Diff(va.Pools[p], vb.Pools[p]); d != "" {
				diffs = append(diffs, fmt.Sprintf("gateway %s, pool %s (-%s +%s):\n%s", gw, p, a.Side.Name, b.Side.Name, d))
			}
		}
	}
	return diffs, nil
}
