// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"crypto/tls"
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"
)

// Cluster warming, as Envoy does it (source/common/upstream/
// cluster_manager_impl.cc addOrUpdateCluster; source/extensions/clusters/
// eds/eds.cc; source/extensions/config_subscription/grpc/grpc_mux_impl.cc
// and new_grpc_mux_impl.cc):
//
//   - CDS adding a cluster, or replacing one with different content (Envoy
//     compares the message hash), creates a new cluster that warms. Its EDS
//     subscription starts anew and it is fed only by an EDS response that
//     carries its service name and arrives after it was created (the mux
//     hands a response to the watches that exist when it arrives); an
//     assignment the data plane received earlier does not count.
//   - While it warms, the cluster it replaces (if any) keeps serving, with
//     the endpoints of its own subscription.
//   - eds_config.initial_fetch_timeout (default 15 s, 0: none) bounds the
//     wait: when it fires first the cluster finishes warming with no
//     endpoints (EdsClusterImpl::onConfigUpdateFailed then onPreInitComplete;
//     requests get 503 "no healthy upstream" until an assignment arrives).
//     Envoy with envoy.restart_features.use_eds_cache_for_ads would use the
//     cached assignment there; the data plane is stricter and does not.
//   - On a SotW stream the new watch makes Envoy send an EDS request with
//     the same names, version and nonce as its last ACK
//     (GrpcMuxImpl::addWatch queues a request on every added watch); on a
//     delta stream it sends nothing, the name being already subscribed
//     (NewGrpcMuxImpl::updateWatch sends only names new to the mux).

// clusterWarm is one accepted cluster since CDS last created or replaced
// it. Guarded by DataPlane.mu.
type clusterWarm struct {
	pb      *clusterv3.Cluster
	edsName string
	// fed: an EDS response for edsName arrived after the cluster was
	// created; from then on it uses the store's assignment for the name.
	fed bool
	// timedOut: initial_fetch_timeout fired first: warm, no endpoints.
	timedOut bool
	timer    *time.Timer
}

func (w *clusterWarm) ready() bool { return w.fed || w.timedOut }

func (w *clusterWarm) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// warmClusterLocked records an accepted cluster: unchanged content keeps
// its state, else it starts warming (and its timer). It reports whether
// a new cluster started warming. dp.mu is held.
func (dp *DataPlane) warmClusterLocked(c *clusterEntry) bool {
	if old := dp.warm[c.cfg.name]; old != nil {
		if proto.Equal(old.pb, c.pb) {
			return false
		}
		old.stop()
	}
	w := &clusterWarm{pb: c.pb, edsName: c.cfg.edsName}
	dp.warm[c.cfg.name] = w
	if d := c.cfg.initialFetchTimeout; d > 0 {
		name := c.cfg.name
		w.timer = time.AfterFunc(d, func() { dp.fetchTimedOut(name, w) })
	}
	return true
}

// fetchTimedOut ends w's warming with no endpoints, unless it was fed or
// replaced meanwhile.
func (dp *DataPlane) fetchTimedOut(name string, w *clusterWarm) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed || dp.warm[name] != w || w.fed {
		return
	}
	w.timedOut = true
	dp.log.Warn("dataplane: initial fetch timed out; cluster warmed with no endpoints", "cluster", name, "eds", w.edsName)
	dp.publishLocked()
}

// feedLocked hands an EDS response's assignment for edsName to every
// cluster that uses the name. dp.mu is held.
func (dp *DataPlane) feedLocked(edsName string) {
	for _, w := range dp.warm {
		if w.edsName == edsName {
			w.fed = true
			w.stop()
		}
	}
}

// pruneWarmLocked forgets clusters CDS removed. dp.mu is held.
func (dp *DataPlane) pruneWarmLocked() {
	for name, w := range dp.warm {
		if dp.store.clusters[name] == nil {
			w.stop()
			delete(dp.warm, name)
		}
	}
}

// activeClusterLocked is what serves for the accepted cluster c: c itself
// once warm (with the endpoints it was fed, or none after a timeout), else
// the cluster it replaces, or nothing. dp.mu is held.
func (dp *DataPlane) activeClusterLocked(name string, c *clusterEntry, prev *activeConfig) *activeCluster {
	w := dp.warm[name]
	// A client certificate over SDS is an init target of the cluster too:
	// it does not serve before the secret has arrived.
	secretReady := c.cfg.clientCertSDS == "" || dp.store.secrets[c.cfg.clientCertSDS] != nil
	if w != nil && w.ready() && secretReady {
		rt := dp.clusters[name]
		if rt == nil || !proto.Equal(rt.pb, c.pb) {
			if rt != nil {
				rt.close()
			}
			rt = newClusterRuntime(c.pb, dp.withClientCert(c.cfg), dp.opts.Dial)
			dp.clusters[name] = rt
		}
		var addrs []string
		if e := dp.store.endpoints[c.cfg.edsName]; w.fed && e != nil {
			addrs = e.addrs
		}
		return &activeCluster{rt: rt, addrs: addrs}
	}
	old := prev.clusters[name]
	if old == nil {
		return nil
	}
	addrs := old.addrs
	if e := dp.store.endpoints[old.rt.cfg.edsName]; e != nil {
		addrs = e.addrs
	}
	return &activeCluster{rt: old.rt, addrs: addrs}
}

// withClientCert is cfg with its upstream TLS presenting the certificate
// of its SDS secret as it is at each handshake: a new version of the
// secret is used by the next connection, as Envoy's SDS update of a
// transport socket factory (source/common/secret/sds_api.cc) applies to
// new connections only. cfg itself is not modified.
func (dp *DataPlane) withClientCert(cfg *clusterConfig) *clusterConfig {
	if cfg.clientCertSDS == "" || cfg.tls == nil {
		return cfg
	}
	out := *cfg
	out.tls = cfg.tls.Clone()
	name := cfg.clientCertSDS
	out.tls.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if ac := dp.active.Load(); ac != nil {
			if cert := ac.secrets[name]; cert != nil {
				return cert, nil
			}
		}
		return nil, fmt.Errorf("client certificate secret %s missing", name)
	}
	return &out
}
