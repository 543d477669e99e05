// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
)

func getBody(t *testing.T, e *env, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(e.http.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestConfigDump(t *testing.T) {
	e := seedEnv(t, envOptions{})
	waitFor(t, "ready", e.srv.Ready)
	code, body := getBody(t, e, "/debug/config_dump?gateway="+seedGatewayKey)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	dump := &adminv3.ConfigDump{}
	if err := protojson.Unmarshal([]byte(body), dump); err != nil {
		t.Fatalf("not an envoy.admin.v3.ConfigDump: %v", err)
	}
	var types []string
	for _, a := range dump.GetConfigs() {
		types = append(types, a.GetTypeUrl())
	}
	want := []string{
		"type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
		"type.googleapis.com/envoy.admin.v3.EndpointsConfigDump",
		"type.googleapis.com/envoy.admin.v3.ListenersConfigDump",
		"type.googleapis.com/envoy.admin.v3.RoutesConfigDump",
		"type.googleapis.com/envoy.admin.v3.SecretsConfigDump",
	}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("config types (-want +got):\n%s", diff)
	}
	for _, s := range []string{`"dynamicActiveClusters"`, `"dynamicEndpointConfigs"`, `"dynamicListeners"`, `"activeState"`, `"dynamicRouteConfigs"`, `"10.244.0.13"`, `"versionInfo"`} {
		if !strings.Contains(body, s) {
			t.Errorf("config_dump lacks %s", s)
		}
	}
	if code, _ := getBody(t, e, "/debug/config_dump"); code != http.StatusBadRequest {
		t.Errorf("without gateway: %d", code)
	}
	if code, _ := getBody(t, e, "/debug/config_dump?gateway=nope/nope"); code != http.StatusNotFound {
		t.Errorf("unknown gateway: %d", code)
	}
}

func TestSyncz(t *testing.T) {
	e := seedEnv(t, envOptions{})
	c := e.sotw(seedNode())
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	r := c.recv()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType, ResponseNonce: r.GetNonce(), VersionInfo: r.GetVersionInfo()})
	waitFor(t, "ack", func() bool {
		st := e.srv.tracker.Status()
		return len(st) == 1 && st[0].Types["lds"] != nil && st[0].Types["lds"].Acked != ""
	})
	code, body := getBody(t, e, "/debug/syncz")
	if code != http.StatusOK {
		t.Fatal(code)
	}
	var st []ProxyStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Node != seedNode().GetId() || st[0].Gateway != seedGatewayKey ||
		st[0].Types["lds"].Sent != r.GetVersionInfo() || st[0].Types["lds"].Acked != r.GetVersionInfo() {
		t.Errorf("syncz: %s", body)
	}
}

func TestMetricsAndKrtz(t *testing.T) {
	e := seedEnv(t, envOptions{})
	waitFor(t, "ready", e.srv.Ready)
	code, body := getBody(t, e, "/metrics")
	if code != http.StatusOK || !strings.Contains(body, "infermesh_xds_pushes_total") {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	code, body = getBody(t, e, "/debug/krtz")
	if code != http.StatusOK || !strings.Contains(body, "xds/GatewayResources") {
		t.Errorf("/debug/krtz: %d\n%s", code, body)
	}
}
