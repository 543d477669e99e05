// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Handler returns the debug HTTP handler, to mount on pilot-discovery's
// debug listener (pilot/pkg/bootstrap/http.go puts only its paths outside
// /debug/ on the network):
//
//	GET /debug/config_dump?gateway=<ns>/<name>
//	    the Gateway's published configuration as Envoy's admin /config_dump
//	    prints it (envoy.admin.v3.ConfigDump, protojson): ClustersConfigDump
//	    (dynamic_active_clusters), EndpointsConfigDump
//	    (dynamic_endpoint_configs), ListenersConfigDump (dynamic_listeners,
//	    active_state), RoutesConfigDump (dynamic_route_configs) and
//	    SecretsConfigDump (dynamic_active_secrets), each with the resource's
//	    version_info. Secrets are redacted as Envoy's admin redacts them
//	    (Redact: the private key reads "[redacted]"). 400 without the
//	    parameter, 404 for a Gateway without a published configuration.
//	GET /debug/syncz   every open stream (JSON []ProxyStatus): node id,
//	    Gateway, user agent and version (belowVersionFloor for an Envoy
//	    older than EnvoyVersionFloor), per type the version sent, acked,
//	    and nacked with its error, and what of its Gateway's translation is
//	    refused (refused).
//	GET /debug/krtz    Config.KrtDebug (404 when unset).
//	GET /metrics       Config.Registry (404 when unset).
//	GET /ready         200 once the first configuration is published (every
//	    input collection synced), else 503. Ready means serving: a Gateway
//	    served in part does not make it fail (that would take every
//	    Gateway's control plane away over one Gateway's problem).
//	GET /healthz/config  200 "ok" when every Gateway's translation is served
//	    in full, else 503 with one line per Gateway that is not:
//	    "<namespace>/<name>: N refused" (no messages: they may carry a
//	    tenant's values, and this path is on the network). Not meant for a
//	    probe: restarting or unreadying pilot-discovery fixes nothing.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/config_dump", s.serveConfigDump)
	mux.HandleFunc("GET /debug/syncz", s.serveSyncz)
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Ready() {
			http.Error(w, "not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /healthz/config", s.serveConfigHealth)
	if s.cfg.KrtDebug != nil {
		mux.Handle("GET /debug/krtz", s.cfg.KrtDebug)
	}
	if s.cfg.Registry != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{}))
	}
	return mux
}

func (s *Server) serveConfigDump(w http.ResponseWriter, r *http.Request) {
	gw := r.URL.Query().Get("gateway")
	if gw == "" {
		http.Error(w, "missing query parameter gateway=<namespace>/<name>", http.StatusBadRequest)
		return
	}
	dump, ok, err := s.ConfigDump(gw)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if !ok {
		http.Error(w, "no configuration published for gateway "+gw, http.StatusNotFound)
		return
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(dump)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// ConfigDump returns the published configuration of gateway
// ("namespace/name") as an Envoy admin ConfigDump, or false when it has
// none.
func (s *Server) ConfigDump(gateway string) (*adminv3.ConfigDump, bool, error) {
	snap, eds, sds, ok := s.cache.snapshot(gateway)
	if !ok {
		return nil, false, nil
	}
	clusters := &adminv3.ClustersConfigDump{}
	for _, e := range snap.byKind[kindCluster] {
		clusters.DynamicActiveClusters = append(clusters.DynamicActiveClusters,
			&adminv3.ClustersConfigDump_DynamicCluster{VersionInfo: e.version, Cluster: e.any})
	}
	endpoints := &adminv3.EndpointsConfigDump{}
	for _, e := range eds {
		endpoints.DynamicEndpointConfigs = append(endpoints.DynamicEndpointConfigs,
			&adminv3.EndpointsConfigDump_DynamicEndpointConfig{VersionInfo: e.version, EndpointConfig: e.any})
	}
	listeners := &adminv3.ListenersConfigDump{}
	for _, e := range snap.byKind[kindListener] {
		listeners.DynamicListeners = append(listeners.DynamicListeners, &adminv3.ListenersConfigDump_DynamicListener{
			Name: e.name, ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: e.version, Listener: e.any},
		})
	}
	routes := &adminv3.RoutesConfigDump{}
	for _, e := range snap.byKind[kindRoute] {
		routes.DynamicRouteConfigs = append(routes.DynamicRouteConfigs,
			&adminv3.RoutesConfigDump_DynamicRouteConfig{VersionInfo: e.version, RouteConfig: e.any})
	}
	secrets := &adminv3.SecretsConfigDump{}
	for _, e := range sds {
		// A copy: the entry is shared with the streams and must keep its key.
		a := proto.Clone(e.any).(*anypb.Any)
		Redact(a)
		secrets.DynamicActiveSecrets = append(secrets.DynamicActiveSecrets,
			&adminv3.SecretsConfigDump_DynamicSecret{Name: e.name, VersionInfo: e.version, Secret: a})
	}
	dump := &adminv3.ConfigDump{}
	for _, m := range []proto.Message{clusters, endpoints, listeners, routes, secrets} {
		a, err := anypb.New(m)
		if err != nil {
			return nil, false, err
		}
		dump.Configs = append(dump.Configs, a)
	}
	return dump, true, nil
}

func (s *Server) serveConfigHealth(w http.ResponseWriter, _ *http.Request) {
	counts := s.RefusedGateways()
	if len(counts) == 0 {
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %d refused\n", k, counts[k])
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(b.String()))
}

func (s *Server) serveSyncz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.tracker.Status())
}
