// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pkg/bootstrap"
	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// ourBootstrap is pkg/bootstrap's bootstrap (plaintext ADS by name, so the
// ADS cluster is STRICT_DNS), typed, for mutation.
func ourBootstrap(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	b, err := bootstrap.Build(bootstrap.Config{
		NodeID: "gw-0", Cluster: "gateway", GatewayNamespace: "ns", GatewayName: "gw",
		XDSAddress: "pilot-discovery.infermesh-system.svc:15010", Plaintext: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseTyped(t *testing.T, b *bootstrapv3.Bootstrap) (*adsTarget, error) {
	t.Helper()
	raw, err := protojson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return parseBootstrap(raw)
}

// The bootstrap pkg/bootstrap writes compiles whole: the status listener on
// 0.0.0.0:15021 whose only route sends /healthz/ready to the admin cluster
// as /ready, the admin cluster (STATIC 127.0.0.1:15000), the ADS cluster
// with its TCP keepalive, and the admin on 127.0.0.1:15000.
func TestStaticResourcesOfOurBootstrap(t *testing.T) {
	tg, err := parseTyped(t, ourBootstrap(t))
	if err != nil {
		t.Fatal(err)
	}
	st := tg.static
	if st.admin != "127.0.0.1:15000" {
		t.Errorf("admin = %q, want 127.0.0.1:15000", st.admin)
	}
	if len(st.listeners) != 1 {
		t.Fatalf("static listeners = %d, want 1", len(st.listeners))
	}
	l := st.listeners[0]
	if l.name != bootstrap.StatusListenerName || l.address != "0.0.0.0" || l.port != bootstrap.DefaultStatusPort {
		t.Errorf("status listener = %s %s:%d", l.name, l.address, l.port)
	}
	vh := l.routes.selectVirtualHost("10.0.0.7:15021")
	if vh == nil {
		t.Fatal("no virtual host for the probe's Host")
	}
	r := vh.selectRoute(&extproc.Request{Method: http.MethodGet, Path: bootstrap.ReadyPath, Headers: http.Header{}})
	if r == nil || r.cluster != bootstrap.AdminClusterName || r.prefixRewrite != "/ready" {
		t.Fatalf("route for %s = %+v, want cluster admin with prefix_rewrite /ready", bootstrap.ReadyPath, r)
	}
	if r := vh.selectRoute(&extproc.Request{Method: http.MethodGet, Path: "/ready", Headers: http.Header{}}); r != nil {
		t.Errorf("the status listener routes /ready; only %s is routed", bootstrap.ReadyPath)
	}
	admin := st.clusters[bootstrap.AdminClusterName]
	if admin == nil || strings.Join(admin.addrs, ",") != "127.0.0.1:15000" || admin.cfg.http2 {
		t.Errorf("admin cluster = %+v, want HTTP/1.1 to 127.0.0.1:15000", admin)
	}
	xds := st.clusters[bootstrap.XDSClusterName]
	if xds == nil || strings.Join(xds.addrs, ",") != "pilot-discovery.infermesh-system.svc:15010" {
		t.Fatalf("ADS cluster = %+v", xds)
	}
	want := net.KeepAliveConfig{Enable: true, Idle: 300 * time.Second, Interval: 30 * time.Second, Count: 3}
	if tg.keepalive == nil || *tg.keepalive != want {
		t.Errorf("ADS keepalive = %+v, want %+v", tg.keepalive, want)
	}
}

// Anything of the static resources or admin that the data plane does not
// implement fails the bootstrap with the field's name; nothing is skipped.
func TestStaticResourcesRefused(t *testing.T) {
	status := func(b *bootstrapv3.Bootstrap) *listenerv3.Listener { return b.GetStaticResources().GetListeners()[0] }
	editHCM := func(t *testing.T, b *bootstrapv3.Bootstrap, edit func(*hcmv3.HttpConnectionManager)) {
		f := status(b).GetFilterChains()[0].GetFilters()[0]
		var hcm hcmv3.HttpConnectionManager
		if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
			t.Fatal(err)
		}
		edit(&hcm)
		a, err := anypb.New(&hcm)
		if err != nil {
			t.Fatal(err)
		}
		f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
	}
	adminCluster := func(b *bootstrapv3.Bootstrap) *clusterv3.Cluster {
		for _, c := range b.GetStaticResources().GetClusters() {
			if c.GetName() == bootstrap.AdminClusterName {
				return c
			}
		}
		t.Fatal("no admin cluster")
		return nil
	}
	cases := []struct {
		name string
		edit func(*testing.T, *bootstrapv3.Bootstrap)
		want string
	}{
		{"listener field", func(_ *testing.T, b *bootstrapv3.Bootstrap) {
			status(b).PerConnectionBufferLimitBytes = wrapperspb.UInt32(1024)
		}, "unimplemented field envoy.config.listener.v3.Listener.per_connection_buffer_limit_bytes"},
		{"HCM field", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editHCM(t, b, func(h *hcmv3.HttpConnectionManager) { h.ServerName = "x" })
		}, "unimplemented field envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.server_name"},
		{"route field", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editHCM(t, b, func(h *hcmv3.HttpConnectionManager) {
				h.GetRouteConfig().GetVirtualHosts()[0].RequireTls = routev3.VirtualHost_ALL
			})
		}, "unimplemented field envoy.config.route.v3.VirtualHost.require_tls"},
		{"secrets", func(_ *testing.T, b *bootstrapv3.Bootstrap) {
			b.StaticResources.Secrets = append(b.StaticResources.Secrets, &tlsv3.Secret{Name: "s"})
		}, "unimplemented field envoy.config.bootstrap.v3.Bootstrap.StaticResources.secrets"},
		{"admin field", func(_ *testing.T, b *bootstrapv3.Bootstrap) {
			b.Admin.ProfilePath = "/tmp/envoy.prof"
		}, "bootstrap: admin: unimplemented field envoy.config.bootstrap.v3.Admin.profile_path"},
		{"cluster field", func(_ *testing.T, b *bootstrapv3.Bootstrap) {
			adminCluster(b).PerConnectionBufferLimitBytes = wrapperspb.UInt32(1024)
		}, "unimplemented field envoy.config.cluster.v3.Cluster.per_connection_buffer_limit_bytes"},
		{"cluster type", func(_ *testing.T, b *bootstrapv3.Bootstrap) {
			adminCluster(b).ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS}
		}, "static cluster type LOGICAL_DNS not implemented"},
		{"STATIC with a name", func(_ *testing.T, b *bootstrapv3.Bootstrap) {
			ep := adminCluster(b).GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint()
			ep.GetAddress().GetSocketAddress().Address = "localhost"
		}, `STATIC cluster endpoint "localhost" is not an IP address`},
		{"route to no static cluster", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editHCM(t, b, func(h *hcmv3.HttpConnectionManager) {
				h.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute().ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "nope"}
			})
		}, "unknown cluster 'nope'"},
		{"rds on a static listener", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editHCM(t, b, func(h *hcmv3.HttpConnectionManager) {
				h.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "r", ConfigSource: &corev3.ConfigSource{
					ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
				}}}
			})
		}, "routes must be inline (route_config)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := ourBootstrap(t)
			tc.edit(t, b)
			_, err := parseTyped(t, b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseBootstrap error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A listener or cluster over xDS named as a static one is NACKed (Envoy
// refuses the listener and skips the cluster).
func TestXDSResourceNamedAsStaticIsRefused(t *testing.T) {
	dp := newTestDP(t, Options{})
	c := &clusterv3.Cluster{
		Name: bootstrap.AdminClusterName, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
	}
	a, err := anypb.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.decode(resourcev3.ClusterType, a); err == nil || !strings.Contains(err.Error(), "static resource of this name") {
		t.Errorf("CDS cluster %q: error %v, want a refusal", c.Name, err)
	}
	c.Name = "outbound|80||svc"
	if a, err = anypb.New(c); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.decode(resourcev3.ClusterType, a); err != nil {
		t.Errorf("CDS cluster %q: %v", c.Name, err)
	}
	l := seedListener(t)
	l.Name = bootstrap.StatusListenerName
	if a, err = anypb.New(l); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.decode(resourcev3.ListenerType, a); err == nil || !strings.Contains(err.Error(), "static resource of this name") {
		t.Errorf("LDS listener %q: error %v, want a refusal", l.Name, err)
	}
}

// The admin's /ready: the state's name, 200 only when LIVE; other paths
// 404 with Envoy's "invalid path" text.
func TestAdminReady(t *testing.T) {
	dp := newTestDP(t, Options{})
	h := adminHandler{dp}
	do := func(path string) (int, string, http.Header) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		b, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(b), rec.Result().Header
	}
	for _, tc := range []struct {
		state ServerState
		code  int
		body  string
	}{
		{StatePreInitializing, 503, "PRE_INITIALIZING\n"},
		{StateInitializing, 503, "INITIALIZING\n"},
		{StateLive, 200, "LIVE\n"},
	} {
		dp.serverState.Store(int32(tc.state))
		for _, path := range []string{"/ready", "/ready?x=1"} {
			code, body, hdr := do(path)
			if code != tc.code || body != tc.body || hdr.Get("Content-Type") != "text/plain; charset=UTF-8" {
				t.Errorf("%s in %v = %d %q (%s), want %d %q text/plain; charset=UTF-8", path, tc.state, code, body, hdr.Get("Content-Type"), tc.code, tc.body)
			}
		}
	}
	for _, path := range []string{"/", "/stats", "/server_info", "/healthz/ready", "/ready/"} {
		if code, body, _ := do(path); code != 404 || !strings.HasPrefix(body, "invalid path. admin commands are:\n") {
			t.Errorf("%s = %d %q, want 404 invalid path", path, code, body)
		}
	}
}
