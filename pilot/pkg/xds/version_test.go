// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/test/logbuf"
)

// envoyNode is a proxy of Gateway ns/name that declares itself as Envoy
// does (source/server/server.cc): user_agent_name "envoy" and a structured
// user_agent_build_version.
func envoyNode(id, ns, name string, major, minor, patch uint32) *corev3.Node {
	n := node(id, ns, name)
	n.UserAgentName = "envoy"
	n.UserAgentVersionType = &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
		Version: &typev3.SemanticVersion{MajorNumber: major, MinorNumber: minor, Patch: patch},
	}}
	return n
}

func gaugeValue(t *testing.T, e *env, name, label string) (float64, bool) {
	t.Helper()
	mfs, err := e.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

const floorWarning = "older than the version floor"

// syncz reads /debug/syncz, keyed by node id.
func syncz(t *testing.T, e *env) map[string]ProxyStatus {
	t.Helper()
	code, body := getBody(t, e, "/debug/syncz")
	if code != http.StatusOK {
		t.Fatalf("/debug/syncz: %d %s", code, body)
	}
	var st []ProxyStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	out := map[string]ProxyStatus{}
	for _, p := range st {
		out[p.Node] = p
	}
	return out
}

// TestVersionFloor: an Envoy 1.37 is served, logged once at WARN with its
// node and version, counted per Gateway while its stream is open, and
// reported in /debug/syncz; an Envoy 1.38 and a client that sends no
// version are none of these.
func TestVersionFloor(t *testing.T) {
	logs := &logbuf.Buffer{}
	e := seedEnv(t, envOptions{logger: slog.New(slog.NewTextHandler(logs, nil))})
	old := e.sotw(envoyNode("old-envoy", "gateway-namespace", "gateway", 1, 37, 2))
	current := e.sotw(envoyNode("current-envoy", "gateway-namespace", "gateway", 1, 38, 0))
	plain := e.sotw(node("test-client", "gateway-namespace", "gateway"))
	for _, c := range []*sotwClient{old, current, plain} {
		c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
		r := c.recv()
		if len(r.GetResources()) == 0 {
			t.Fatalf("%s: not served", c.s.Node().GetId())
		}
		// A second request on the stream (an ACK) must not log again.
		c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: r.GetNonce(), VersionInfo: r.GetVersionInfo()})
	}
	waitFor(t, "three acks", func() bool {
		n := 0
		for _, p := range e.srv.tracker.Status() {
			if p.Types["cds"] != nil && p.Types["cds"].Acked != "" {
				n++
			}
		}
		return n == 3
	})

	got := syncz(t, e)
	want := map[string]ProxyVersion{
		"old-envoy":     {UserAgent: "envoy", Version: "1.37.2", BelowFloor: true},
		"current-envoy": {UserAgent: "envoy", Version: "1.38.0"},
		"test-client":   {},
	}
	for id, w := range want {
		if diff := cmp.Diff(w, got[id].ProxyVersion); diff != "" {
			t.Errorf("syncz %s (-want +got):\n%s", id, diff)
		}
	}
	warned := logs.Lines(floorWarning)
	if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") || !strings.Contains(warned[0], "node=old-envoy") ||
		!strings.Contains(warned[0], "version=1.37.2") || !strings.Contains(warned[0], "gateway="+seedGatewayKey) {
		t.Errorf("want one WARN naming old-envoy, its version and Gateway; got %q", warned)
	}
	if v, ok := gaugeValue(t, e, "infermesh_xds_proxies_below_version_floor", seedGatewayKey); !ok || v != 1 {
		t.Errorf("infermesh_xds_proxies_below_version_floor{gateway=%q} = %v (present %v), want 1", seedGatewayKey, v, ok)
	}

	if err := old.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old Envoy's stream to close", func() bool { return len(e.srv.tracker.Status()) == 2 })
	if v, ok := gaugeValue(t, e, "infermesh_xds_proxies_below_version_floor", seedGatewayKey); ok {
		t.Errorf("after the old Envoy left, the Gateway's series is still there: %v", v)
	}
}

func TestProxyVersionOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		node *corev3.Node
		want ProxyVersion
	}{
		{"Envoy 1.37.9", envoyNode("n", "ns", "gw", 1, 37, 9), ProxyVersion{UserAgent: "envoy", Version: "1.37.9", BelowFloor: true}},
		{"Envoy 1.38.0", envoyNode("n", "ns", "gw", 1, 38, 0), ProxyVersion{UserAgent: "envoy", Version: "1.38.0"}},
		{"Envoy 2.0.0", envoyNode("n", "ns", "gw", 2, 0, 0), ProxyVersion{UserAgent: "envoy", Version: "2.0.0"}},
		{"Envoy 0.39.0", envoyNode("n", "ns", "gw", 0, 39, 0), ProxyVersion{UserAgent: "envoy", Version: "0.39.0", BelowFloor: true}},
		{"Envoy without a build version", &corev3.Node{UserAgentName: "envoy"}, ProxyVersion{UserAgent: "envoy", BelowFloor: true}},
		{"Envoy with only a string version", &corev3.Node{UserAgentName: "envoy", UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: "1.40.0"}},
			ProxyVersion{UserAgent: "envoy", Version: "1.40.0", BelowFloor: true}},
		{"our proxy-config client", &corev3.Node{UserAgentName: "pilot-discovery", UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: "0.1.0"}},
			ProxyVersion{UserAgent: "pilot-discovery", Version: "0.1.0"}},
		{"no user agent", &corev3.Node{Id: "x"}, ProxyVersion{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, proxyVersionOf(tc.node)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{"1.38.0": "1.38.0", "v1.40.2": "1.40.2", "1.39.1-dev": "1.39.1-dev"} {
		got, err := ParseVersion(in)
		if err != nil || got.String() != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1.38", "1.x.0", "latest"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q): no error", in)
		}
	}
}

// TestGatewayProxyImageAtOrAboveFloor: the Envoy image Gateway Deployments
// run by default is pinned to a release at or above the floor.
func TestGatewayProxyImageAtOrAboveFloor(t *testing.T) {
	img := features.Defaults().GatewayProxyImage
	i := strings.LastIndex(img, ":")
	if i < 0 {
		t.Fatalf("image %q has no tag", img)
	}
	tag := strings.TrimPrefix(img[i+1:], "distroless-")
	v, err := ParseVersion(tag)
	if err != nil {
		t.Fatalf("image %q: tag is not an Envoy release: %v", img, err)
	}
	if v.LT(EnvoyVersionFloor) {
		t.Errorf("image %q is Envoy %s, below the floor %s", img, v, EnvoyVersionFloor)
	}
}
