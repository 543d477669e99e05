// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"errors"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// validatorAll is what protoc-gen-validate generates on every Envoy type.
type validatorAll interface{ ValidateAll() error }

// Validate checks a Resources value before it is served. It returns every
// problem found, joined (errors.Join), each naming its resource:
//
//  1. every resource passes its ValidateAll() (Envoy's own proto rules),
//     and so does every message packed in an Any inside it (filter configs,
//     per-route configs, load balancing policies, transport sockets,
//     protocol options), which ValidateAll does not look into;
//  2. names are unique within each resource type;
//  3. every route configuration a listener's RDS names exists;
//  4. every cluster a route sends to (cluster, weighted_clusters, request
//     mirrors) or an ext_proc filter calls (listener filter or per-route
//     override) exists, except the two deliberate non-clusters
//     ExtProcPlaceholderCluster and InvalidBackendCluster;
//  5. every EDS cluster's service name has a ClusterLoadAssignment.
func Validate(res Resources) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	n := validateEach(res, fail)
	checkReferences(res, n, fail)
	return errors.Join(errs...)
}

// resourceNames are the names present per type.
type resourceNames struct {
	listeners, routes, clusters, endpoints map[string]bool
}

// validateEach runs validateDeep on every resource and checks names are
// unique per type (Validate rules 1 and 2).
func validateEach(res Resources, fail func(string, ...any)) resourceNames {
	listeners, routes, clusters, endpoints := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, l := range res.Listeners {
		if err := validateDeep(l); err != nil {
			fail("listener %q: %w", l.GetName(), err)
		}
		if listeners[l.GetName()] {
			fail("listener %q: duplicate name", l.GetName())
		}
		listeners[l.GetName()] = true
	}
	for _, r := range res.Routes {
		if err := validateDeep(r); err != nil {
			fail("route configuration %q: %w", r.GetName(), err)
		}
		if routes[r.GetName()] {
			fail("route configuration %q: duplicate name", r.GetName())
		}
		routes[r.GetName()] = true
	}
	for _, c := range res.Clusters {
		if err := validateDeep(c); err != nil {
			fail("cluster %q: %w", c.GetName(), err)
		}
		if clusters[c.GetName()] {
			fail("cluster %q: duplicate name", c.GetName())
		}
		clusters[c.GetName()] = true
	}
	for _, e := range res.Endpoints {
		if err := validateDeep(e); err != nil {
			fail("cluster load assignment %q: %w", e.GetClusterName(), err)
		}
		if endpoints[e.GetClusterName()] {
			fail("cluster load assignment %q: duplicate name", e.GetClusterName())
		}
		endpoints[e.GetClusterName()] = true
	}
	return resourceNames{listeners: listeners, routes: routes, clusters: clusters, endpoints: endpoints}
}

// checkReferences checks that every name one resource uses exists
// (Validate rules 3 to 5).
func checkReferences(res Resources, n resourceNames, fail func(string, ...any)) {
	routes, clusters, endpoints := n.routes, n.clusters, n.endpoints
	needCluster := func(owner, cluster string) {
		if cluster == ExtProcPlaceholderCluster || cluster == InvalidBackendCluster {
			return
		}
		if !clusters[cluster] {
			fail("%s: cluster %q is not in CDS", owner, cluster)
		}
	}
	for _, l := range res.Listeners {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if f.GetTypedConfig() == nil || !f.GetTypedConfig().MessageIs(hcm) {
					continue
				}
				if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
					fail("listener %q: %w", l.GetName(), err)
					continue
				}
				if rds := hcm.GetRds(); rds != nil && !routes[rds.GetRouteConfigName()] {
					fail("listener %q: route configuration %q is not in RDS", l.GetName(), rds.GetRouteConfigName())
				}
				for _, hf := range hcm.GetHttpFilters() {
					ep := &extprocv3.ExternalProcessor{}
					if hf.GetTypedConfig() != nil && hf.GetTypedConfig().MessageIs(ep) && hf.GetTypedConfig().UnmarshalTo(ep) == nil {
						needCluster(fmt.Sprintf("listener %q ext_proc", l.GetName()), ep.GetGrpcService().GetEnvoyGrpc().GetClusterName())
					}
				}
			}
		}
	}
	for _, rc := range res.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				owner := fmt.Sprintf("route configuration %q virtual host %q route %q", rc.GetName(), vh.GetName(), r.GetName())
				checkExtProc(owner, r.GetTypedPerFilterConfig(), needCluster, fail)
				ra := r.GetRoute()
				if ra == nil {
					continue
				}
				if c := ra.GetCluster(); c != "" {
					needCluster(owner, c)
				}
				for _, cw := range ra.GetWeightedClusters().GetClusters() {
					needCluster(owner, cw.GetName())
					checkExtProc(owner, cw.GetTypedPerFilterConfig(), needCluster, fail)
				}
				for _, m := range ra.GetRequestMirrorPolicies() {
					needCluster(owner, m.GetCluster())
				}
			}
		}
	}
	for _, c := range res.Clusters {
		if c.GetType() == clusterv3.Cluster_EDS && !endpoints[edsServiceName(c)] {
			fail("cluster %q: no ClusterLoadAssignment %q in EDS", c.GetName(), edsServiceName(c))
		}
	}
}

func checkExtProc(owner string, tpfc map[string]*anypb.Any, needCluster func(owner, cluster string), fail func(string, ...any)) {
	a := tpfc[FilterExtProc]
	if a == nil {
		return
	}
	per := &extprocv3.ExtProcPerRoute{}
	if err := a.UnmarshalTo(per); err != nil {
		fail("%s: ext_proc per-route config: %w", owner, err)
		return
	}
	if gs := per.GetOverrides().GetGrpcService(); gs != nil {
		needCluster(owner+" ext_proc", gs.GetEnvoyGrpc().GetClusterName())
	}
}

// validateDeep runs ValidateAll on m and on every message packed in an Any
// anywhere inside it, recursively. An Any whose type is not linked into the
// binary is an error: we only emit types we import.
func validateDeep(m proto.Message) error {
	var errs []error
	if v, ok := m.(validatorAll); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, err)
		}
	}
	walkAnys(m.ProtoReflect(), func(a *anypb.Any) {
		inner, err := a.UnmarshalNew()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.GetTypeUrl(), err))
			return
		}
		if err := validateDeep(inner); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.GetTypeUrl(), err))
		}
	})
	return errors.Join(errs...)
}

// walkAnys calls fn for every Any directly or indirectly inside m, without
// descending into the Anys themselves (validateDeep does, after unpacking).
func walkAnys(m protoreflect.Message, fn func(*anypb.Any)) {
	if a, ok := m.Interface().(*anypb.Any); ok {
		fn(a)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				walkAnys(l.Get(i).Message(), fn)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				walkAnys(mv.Message(), fn)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			walkAnys(v.Message(), fn)
		}
		return true
	})
}
