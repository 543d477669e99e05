// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// Re-warming. When CDS replaces a cluster (same name, different content),
// Envoy builds a new cluster that warms: its EDS subscription starts again
// and the cluster is used only once a ClusterLoadAssignment for its name
// arrives after that (Envoy: ClusterManagerImpl::addOrUpdateCluster puts
// the new cluster in warming_clusters_; EdsClusterImpl::startPreInit
// subscribes; the active cluster serves until the warming one is ready).
// The new subscription asks the server for nothing new: on a SotW stream
// the request repeats the names, version and nonce of the last ACK
// (GrpcMuxImpl::addWatch); on a delta stream nothing is sent at all, since
// the name is already subscribed (NewGrpcMuxImpl::updateWatch, WatchMap).
// So the server must send the assignment again on its own, "as Envoy's xDS
// protocol expects" (xds_protocol.rst, "Resource warming"). The same holds
// for RDS when an HCM's Rds (config_source and route_config_name) changes:
// Envoy keys RDS subscriptions by the hash of that message
// (RouteConfigProviderManager), so a changed Rds starts a new subscription
// and its listener waits for a RouteConfiguration.
//
// We do it without per-stream state: the version a stream records for an
// EDS or RDS resource is the resource's own version joined with a key of
// what subscribes to it on the proxy (warmKeys): the versions of the
// Gateway's clusters that use an EDS name, a hash of the Rds messages that
// name a route configuration. When CDS replaces a cluster, its key changes,
// so the assignment differs from what every stream of that Gateway holds
// and goes out again, on SotW and delta streams, after the CDS response
// (responses go out CDS, EDS, LDS, RDS), whether or not the stream's EDS
// watch was open at the publish.

// warmKeys maps an EDS or RDS name to the key of what subscribes to it on
// the Gateway's proxies. A name without a key is versioned as its entry.
type warmKeys map[string]string

// version is the version a stream records for e under these keys.
func (w warmKeys) version(e *entry) string {
	k, ok := w[e.name]
	if !ok {
		return e.version
	}
	return e.version + "/" + k
}

// holds reports, without allocating, whether v (what a stream recorded) is
// e's version under these keys.
func (w warmKeys) holds(v string, e *entry) bool {
	k, ok := w[e.name]
	if !ok {
		return v == e.version
	}
	return len(v) == len(e.version)+1+len(k) && strings.HasPrefix(v, e.version) &&
		v[len(e.version)] == '/' && strings.HasSuffix(v, k)
}

// resource is e as a delta resource, carrying its version under these keys
// (Envoy echoes it back in initial_resource_versions on a reconnect).
func (w warmKeys) resource(e *entry) *discoveryv3.Resource {
	if _, ok := w[e.name]; !ok {
		return e.resource
	}
	return &discoveryv3.Resource{Name: e.name, Version: w.version(e), Resource: e.any}
}

// edsWarmKeys keys each EDS name by the versions (versions: by cluster
// name) of the clusters that use it, in cluster name order: any change of
// such a cluster makes Envoy warm it again.
func edsWarmKeys(clusters []*clusterv3.Cluster, versions map[string]string) warmKeys {
	clusters = slices.SortedFunc(slices.Values(clusters), func(a, b *clusterv3.Cluster) int {
		return strings.Compare(a.GetName(), b.GetName())
	})
	w := warmKeys{}
	for _, c := range clusters {
		if c.GetType() != clusterv3.Cluster_EDS {
			continue
		}
		n := edsName(c)
		if k, ok := w[n]; ok {
			w[n] = k + "," + versions[c.GetName()]
		} else {
			w[n] = versions[c.GetName()]
		}
	}
	return w
}

// rdsWarmKeys keys each route configuration name by a hash of the Rds
// messages of the HCMs that name it: Envoy shares one RDS subscription
// between HCMs whose Rds serializes equal and starts a new one otherwise.
func rdsWarmKeys(listeners []*listenerv3.Listener) (warmKeys, error) {
	parts := map[string]map[string]bool{}
	for _, l := range listeners {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				a := f.GetTypedConfig()
				if a == nil || !a.MessageIs((*hcmv3.HttpConnectionManager)(nil)) {
					continue
				}
				var hcm hcmv3.HttpConnectionManager
				if err := a.UnmarshalTo(&hcm); err != nil {
					return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
				}
				rds := hcm.GetRds()
				if rds == nil {
					continue
				}
				b, err := marshalOpts.Marshal(rds)
				if err != nil {
					return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
				}
				n := rds.GetRouteConfigName()
				if parts[n] == nil {
					parts[n] = map[string]bool{}
				}
				parts[n][string(b)] = true
			}
		}
	}
	w := make(warmKeys, len(parts))
	for n, set := range parts {
		var buf []byte
		for _, b := range slices.Sorted(maps.Keys(set)) {
			buf = append(append(buf, b...), 0)
		}
		w[n] = hashHex(xxhash.Sum64(buf))
	}
	return w, nil
}
