// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/bootstrap"
)

// The tests in this file pin the places where our configuration knowingly
// differs from Istio's, or follows it, on the seed Gateway; each names the
// "Decisions" entry of architecture/xds.md that gives the reason. Changing
// one of these values is a decision to revisit there, not a golden update.

// Decision: normalize_path on (as Istio); the Host port stripped before
// matching and upstream (as Envoy Gateway); Envoy's 5-minute
// stream_idle_timeout and its own 100-continue handling kept; WebSocket
// upgrades accepted, no other.
func TestDecisionsConnectionManager(t *testing.T) {
	res := build(t, seedGateway(), seedInputs(), inferenceOn)
	hcm := hcmOf(t, res, res.Listeners[0].Name)
	if !hcm.GetNormalizePath().GetValue() {
		t.Error("normalize_path must be on: a dot segment must not carry a request past a prefix route")
	}
	// The Host's port is left out of virtual host selection
	// (ignore_port_in_host_matching on the route configuration) but kept
	// for the backend: strip_any_host_port would remove it from the header.
	if hcm.GetStripAnyHostPort() || hcm.GetStripMatchingHostPort() {
		t.Error("the connection manager must not strip the Host's port: the backend sees it (HTTPRouteHostnameIntersection)")
	}
	for _, rc := range res.Routes {
		if !rc.GetIgnorePortInHostMatching() {
			t.Errorf("route configuration %s: ignore_port_in_host_matching must be on", rc.Name)
		}
	}
	if hcm.GetStreamIdleTimeout() != nil {
		t.Errorf("stream_idle_timeout = %v: Envoy's default (5 min) is the chosen bound", hcm.GetStreamIdleTimeout())
	}
	if hcm.GetProxy_100Continue() {
		t.Error("proxy_100_continue must stay off: Envoy answers 100 itself so the EPP gets the body before an upstream exists")
	}
	if ucs := hcm.GetUpgradeConfigs(); len(ucs) != 1 || ucs[0].GetUpgradeType() != "websocket" || ucs[0].Enabled != nil || len(ucs[0].GetFilters()) != 0 {
		t.Errorf("upgrade_configs = %v, want WebSocket alone, enabled, with the default filters", ucs)
	}
	if hcm.GetMergeSlashes() {
		t.Error("merge_slashes must stay off (Istio's default path normalization does not merge)")
	}
}

// Decision: the EPP's filter keeps the route cache (RETAIN): its pick is
// carried by metadata and must never move the request to another route or
// weighted cluster.
func TestDecisionsRouteCacheRetained(t *testing.T) {
	res := build(t, seedGateway(), seedInputs(), inferenceOn)
	for _, f := range hcmOf(t, res, res.Listeners[0].Name).GetHttpFilters() {
		if f.GetName() != FilterExtProc {
			continue
		}
		var ep extprocv3.ExternalProcessor
		if err := f.GetTypedConfig().UnmarshalTo(&ep); err != nil {
			t.Fatal(err)
		}
		if ep.GetRouteCacheAction() != extprocv3.ExternalProcessor_RETAIN {
			t.Errorf("route_cache_action = %v, want RETAIN", ep.GetRouteCacheAction())
		}
		return
	}
	t.Fatal("no ext_proc filter")
}

// Decision: no retry policy on pool routes (a retry would go to the
// override_host fallback, bypassing the EPP); no health checking or outlier
// detection and every endpoint HEALTHY, so the panic threshold can never
// apply; the EPP cluster balances round robin.
func TestDecisionsRetriesAndClusters(t *testing.T) {
	res := build(t, seedGateway(), seedInputs(), inferenceOn)
	for _, rc := range res.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if r.GetRoute().GetRetryPolicy() != nil || vh.GetRetryPolicy() != nil {
					t.Errorf("route %s has a retry policy", r.GetName())
				}
				if r.GetRoute().GetMaxStreamDuration().GetGrpcTimeoutHeaderMax() != nil {
					t.Errorf("route %s honours grpc-timeout in Envoy", r.GetName())
				}
			}
		}
	}
	for _, c := range res.Clusters {
		if len(c.GetHealthChecks()) != 0 || c.GetOutlierDetection() != nil {
			t.Errorf("cluster %s has health checking: revisit the panic threshold decision", c.GetName())
		}
		if c.GetCommonLbConfig() != nil {
			t.Errorf("cluster %s sets common_lb_config %v", c.GetName(), c.GetCommonLbConfig())
		}
		if c.GetLoadBalancingPolicy() == nil && c.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN {
			t.Errorf("cluster %s: lb_policy %v", c.GetName(), c.GetLbPolicy())
		}
		for _, th := range c.GetCircuitBreakers().GetThresholds() {
			if th.GetMaxRetries() != nil {
				t.Errorf("cluster %s: max_retries set while no route retries", c.GetName())
			}
		}
	}
	for _, cla := range res.Endpoints {
		for _, loc := range cla.GetEndpoints() {
			for _, e := range loc.GetLbEndpoints() {
				if e.GetHealthStatus() != corev3.HealthStatus_HEALTHY {
					t.Errorf("%s: endpoint %v is %v", cla.GetClusterName(), e.GetEndpoint().GetAddress(), e.GetHealthStatus())
				}
			}
		}
	}
}

// Decision: with the STREAMED EPP body mode (a GatewayClass parameter),
// message_timeout is 1000 s, above the connection manager's 5-minute
// stream_idle_timeout, not Envoy's 200 ms default: the timer measures the
// client's upload gaps and the EPP's queueing, which that bound and
// timeouts.request already cover (architecture/xds.md, "message_timeout
// (STREAMED EPP body mode)").
func TestDecisionsStreamedMessageTimeout(t *testing.T) {
	gw := seedGateway()
	gw.EPPBodyMode = model.EPPBodyModeStreamed
	ep := extProcFilterOf(t, build(t, gw, seedInputs(), inferenceOn))
	if got := ep.GetMessageTimeout().AsDuration(); got != 1000*time.Second {
		t.Errorf("message_timeout = %v, want 1000s", got)
	}
	if hcm := hcmOf(t, build(t, gw, seedInputs(), inferenceOn), "0.0.0.0_80"); hcm.GetStreamIdleTimeout() != nil {
		t.Errorf("stream_idle_timeout = %v: the 1000 s message timer relies on Envoy's 5-minute default ending a stall first", hcm.GetStreamIdleTimeout())
	}
}

// Decision: Envoy's RE2 program size limit is 32768 (Istio's value), set
// in the bootstrap's static runtime layer, and the translator refuses a
// user regex above it, so the limit never refuses a route configuration.
func TestDecisionsRE2ProgramSizeLimit(t *testing.T) {
	if bootstrap.RE2MaxProgramSize != 32768 {
		t.Errorf("RE2MaxProgramSize = %d: revisit the decision in architecture/xds.md", bootstrap.RE2MaxProgramSize)
	}
	// 21,601 and 36,000 RE2 instructions (RE2 2022-06-01).
	if err := checkRegex(strings.Repeat(`[^/]{1,800}`, 3)); err != nil {
		t.Errorf("a regex within the limit: %v", err)
	}
	if err := checkRegex(bigRE2); err == nil {
		t.Error("a regex over the limit was accepted")
	}
}

// Decision: an EPP whose client TLS this Gateway cannot have (its
// DestinationRule's credentialName CA missing in the Gateway's namespace;
// an invalid BackendTLSPolicy never reaches the model, the controller
// makes the backend invalid) is a direct 500 on the seed's FailOpen pool,
// with no ext_proc call and no EPP or shadow cluster: FailOpen is for an
// Endpoint Picker that does not answer, not for a configuration error.
// Istio points such a cluster at a credential that never arrives, so a
// FailOpen pool routes around its EPP.
func TestDecisionsUpstreamTLSFailsClosed(t *testing.T) {
	gw := seedGatewayEPPTLS(EPPTLS{CredentialName: "epp-ca", CredentialCAs: map[string]model.CredentialCA{
		"elsewhere": {PEM: []byte("ca")},
	}})
	res := build(t, gw, seedInputs(), inferenceOn)
	r := routesOf(t, res, "http.80", "llm.ssup2.com:80")[0]
	if r.GetDirectResponse().GetStatus() != 500 || r.GetTypedPerFilterConfig()[FilterExtProc] != nil {
		t.Errorf("route %v, want a direct 500 and no ext_proc override", r)
	}
	if len(res.Clusters) != 0 {
		t.Errorf("%d clusters, want none: nothing may be sent to the pool or its EPP", len(res.Clusters))
	}
}
