// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// ServerState is the server's initialization state, named as Envoy's
// envoy.admin.v3.ServerInfo.State, from its init manager's state
// (source/server/utils.cc, Utility::serverState):
//
//   - PRE_INITIALIZING: the init manager has not started. Envoy starts it
//     once the cluster manager is initialized (RunHelper,
//     source/server/server.cc): the static clusters, the first CDS
//     response, and every cluster it added warmed (its EDS assignment, or
//     its initial_fetch_timeout).
//   - INITIALIZING: the init manager waits for its targets: the first LDS
//     response, and every listener it added warmed (its route
//     configuration arrived over RDS).
//   - LIVE: initialized; the workers start and the static listeners begin
//     to accept connections (startWorkers). It stays LIVE: a later change
//     of configuration warms on its own, as in Envoy.
//
// DRAINING (health check failed) is not reached: nothing here fails the
// health check (no /healthcheck/fail, no drain).
type ServerState int32

const (
	StatePreInitializing ServerState = iota
	StateInitializing
	StateLive
)

func (s ServerState) String() string {
	switch s {
	case StatePreInitializing:
		return "PRE_INITIALIZING"
	case StateInitializing:
		return "INITIALIZING"
	case StateLive:
		return "LIVE"
	}
	return "UNKNOWN"
}

// advanceInitLocked moves the server state forward as far as the accepted
// configuration allows, and starts the workers (the static listeners) on
// reaching LIVE. Stricter than Envoy: a first LDS or CDS response that was
// NACKed, or that never came, leaves the server where it is; Envoy ends
// the initial fetch of a subscription on a rejected update and after its
// initial_fetch_timeout (15 s by default) and goes LIVE without
// configuration. dp.mu is held.
func (dp *DataPlane) advanceInitLocked() {
	if dp.initState == StatePreInitializing && dp.clustersInitializedLocked() {
		dp.initState = StateInitializing
		dp.log.Info("dataplane: all clusters initialized. initializing init manager")
	}
	if dp.initState == StateInitializing && dp.listenersInitializedLocked() {
		dp.initState = StateLive
		dp.log.Info("dataplane: all dependencies initialized. starting workers")
		dp.startWorkersLocked()
	}
	dp.serverState.Store(int32(dp.initState))
}

// clustersInitializedLocked: a CDS response was accepted and every cluster
// in effect has warmed. dp.mu is held.
func (dp *DataPlane) clustersInitializedLocked() bool {
	if _, ok := dp.versions[resourcev3.ClusterType]; !ok {
		return false
	}
	for name := range dp.store.clusters {
		if w := dp.warm[name]; w == nil || !w.ready() {
			return false
		}
	}
	return true
}

// listenersInitializedLocked: an LDS response was accepted and every
// listener has its route configurations and SDS secrets (both are init
// targets of a listener in Envoy). dp.mu is held.
func (dp *DataPlane) listenersInitializedLocked() bool {
	if _, ok := dp.versions[resourcev3.ListenerType]; !ok {
		return false
	}
	for _, l := range dp.store.listeners {
		if !dp.store.listenerReady(l.cfg) {
			return false
		}
	}
	return true
}

// State is the server's initialization state, as the admin's /ready
// reports it.
func (dp *DataPlane) State() ServerState { return ServerState(dp.serverState.Load()) }
