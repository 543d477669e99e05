// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// The seed route's rule (tenant A) and a second tenant's route on the same
// listener, to the same pool.
const (
	tenantARule = "llm-namespace.llm-route.0"
	tenantBRule = "team-b.route-b.0"
	tenantAVH   = "llm.ssup2.com:80"
)

// twoTenants is the seed Gateway with a second route, team-b/route-b on
// host bHost, attached to the same listener.
func twoTenants(bHost string) model.Gateway {
	gw := seedGateway()
	b := *gw.Listeners[0].Routes[0]
	b.Namespace, b.Name, b.Hostnames = "team-b", "route-b", []string{bHost}
	gw.Listeners = []model.Listener{gw.Listeners[0]}
	gw.Listeners[0].Routes = []*model.Route{gw.Listeners[0].Routes[0], &b}
	return gw
}

// breakRule returns a push-path hook that, while on is true, adds to every
// entry of the named rule a header value Envoy's formatter refuses (a lone
// '%'), so the Gateway's set fails core.Validate.
func breakRule(on *atomic.Bool, rule string) func(string, *core.Resources) {
	return func(gw string, res *core.Resources) {
		if !on.Load() || gw != seedGatewayKey {
			return
		}
		for _, rc := range res.Routes {
			for _, vh := range rc.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					if r.GetName() == rule {
						r.RequestHeadersToAdd = append(r.RequestHeadersToAdd,
							&corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-discount", Value: "100%"}})
					}
				}
			}
		}
	}
}

// fetchRDS asks a new SotW stream for http.80 and returns it.
func fetchRDS(t *testing.T, e *env) *routev3.RouteConfiguration {
	t.Helper()
	c := e.sotw(seedNode())
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: []string{"http.80"}})
	return unmarshalRoute(t, c.recv())
}

func unmarshalRoute(t *testing.T, r *discoveryv3.DiscoveryResponse) *routev3.RouteConfiguration {
	t.Helper()
	if r.GetTypeUrl() != resourcev3.RouteType || len(r.GetResources()) != 1 {
		t.Fatalf("want one route configuration, got %s with %d resources", r.GetTypeUrl(), len(r.GetResources()))
	}
	rc := &routev3.RouteConfiguration{}
	if err := r.GetResources()[0].UnmarshalTo(rc); err != nil {
		t.Fatal(err)
	}
	return rc
}

// rulesByVH lists each virtual host's route names.
func rulesByVH(rc *routev3.RouteConfiguration) map[string][]string {
	out := map[string][]string{}
	for _, vh := range rc.GetVirtualHosts() {
		out[vh.GetName()] = []string{}
		for _, r := range vh.GetRoutes() {
			out[vh.GetName()] = append(out[vh.GetName()], r.GetName())
		}
	}
	return out
}

// fetchAll returns the names and versions of everything the seed proxy
// gets on one SotW stream: CDS, LDS (wildcard), EDS and RDS by name.
func fetchAll(t *testing.T, e *env) map[string]string {
	t.Helper()
	c := e.sotw(seedNode())
	got := map[string]string{}
	for _, step := range []struct {
		typeURL string
		names   []string
	}{{resourcev3.ClusterType, nil}, {resourcev3.EndpointType, []string{seedShadowCluster, seedEPPCluster}},
		{resourcev3.ListenerType, nil}, {resourcev3.RouteType, []string{"http.80"}}} {
		c.send(&discoveryv3.DiscoveryRequest{TypeUrl: step.typeURL, ResourceNames: step.names})
		r := c.recv()
		got[step.typeURL] = r.GetVersionInfo()
		for _, a := range r.GetResources() {
			m, err := a.UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			got[step.typeURL+" "+resourceName(m)] = string(b)
		}
	}
	return got
}

func resourceName(m proto.Message) string {
	if n, ok := m.(interface{ GetName() string }); ok {
		return n.GetName()
	}
	return m.(interface{ GetClusterName() string }).GetClusterName()
}

// TestFirstPushServesTheValidRoute: at the first push there is no last
// good version; one tenant's rule is invalid, the other tenant's is served,
// and so are the listener and clusters.
func TestFirstPushServesTheValidRoute(t *testing.T) {
	var poison atomic.Bool
	poison.Store(true)
	e := seedEnv(t, envOptions{gateways: []model.Gateway{twoTenants("b.example.com"), otherGateway()},
		mutate: breakRule(&poison, tenantARule)})
	want := map[string][]string{"b.example.com:80": {tenantBRule}, tenantAVH: {}}
	if d := cmp.Diff(want, rulesByVH(fetchRDS(t, e))); d != "" {
		t.Errorf("routes served (-want +got):\n%s", d)
	}
	all := fetchAll(t, e)
	for _, n := range []string{resourcev3.ClusterType + " " + seedShadowCluster, resourcev3.ClusterType + " " + seedEPPCluster,
		resourcev3.ListenerType + " 0.0.0.0_80"} {
		if _, ok := all[n]; !ok {
			t.Errorf("%s not served", n)
		}
	}
}

// TestRestartServesEveryValidResource: a running server keeps the last
// good version of a rule that turns invalid and serves the other tenant's
// change; a new server with the same inputs has no last good version and
// serves every valid resource, byte for byte what the first serves, less
// the invalid rule.
func TestRestartServesEveryValidResource(t *testing.T) {
	var poison atomic.Bool
	first := seedEnv(t, envOptions{gateways: []model.Gateway{twoTenants("b.example.com"), otherGateway()},
		mutate: breakRule(&poison, tenantARule)})
	before := fetchRDS(t, first)
	poison.Store(true)
	first.gateways.UpdateObject(twoTenants("b2.example.com"))
	var after *routev3.RouteConfiguration
	waitFor(t, "tenant B's change served", func() bool {
		after = fetchRDS(t, first)
		return rulesByVH(after)["b2.example.com:80"] != nil
	})
	want := map[string][]string{"b2.example.com:80": {tenantBRule}, tenantAVH: {tenantARule}}
	if d := cmp.Diff(want, rulesByVH(after)); d != "" {
		t.Errorf("running server's routes (-want +got):\n%s", d)
	}
	if !proto.Equal(vhNamed(before, tenantAVH), vhNamed(after, tenantAVH)) {
		t.Error("tenant A's virtual host is not its last good version")
	}

	restarted := seedEnv(t, envOptions{gateways: []model.Gateway{twoTenants("b2.example.com"), otherGateway()},
		mutate: breakRule(&poison, tenantARule)})
	want = map[string][]string{"b2.example.com:80": {tenantBRule}, tenantAVH: {}}
	if d := cmp.Diff(want, rulesByVH(fetchRDS(t, restarted))); d != "" {
		t.Errorf("restarted server's routes (-want +got):\n%s", d)
	}
	a, b := fetchAll(t, first), fetchAll(t, restarted)
	for k, v := range a {
		if strings.HasPrefix(k, resourcev3.RouteType) {
			continue // tenant A's rule: last good on one, left out on the other
		}
		if b[k] != v {
			t.Errorf("%s: the restarted server serves %q, the running one %q", k, short(b[k]), short(v))
		}
	}
	if len(a) != len(b) {
		t.Errorf("the restarted server serves %d entries, the running one %d", len(b), len(a))
	}
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func vhNamed(rc *routev3.RouteConfiguration, name string) *routev3.VirtualHost {
	for _, vh := range rc.GetVirtualHosts() {
		if vh.GetName() == name {
			return vh
		}
	}
	return nil
}

// TestRefusedIsVisible: what is refused shows in the ServingSink (the
// controller's Gateway status reads it), /debug/syncz, the gauge
// infermesh_xds_gateway_invalid_resources and /healthz/config, and clears
// from all of them when the Gateway is served in full again. /ready stays
// 200 throughout.
func TestRefusedIsVisible(t *testing.T) {
	var poison atomic.Bool
	poison.Store(true)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	sink := krt.NewStaticCollection[model.GatewayServing](nil, nil, krt.WithStop(stop))
	e := seedEnv(t, envOptions{gateways: []model.Gateway{twoTenants("b.example.com"), otherGateway()},
		mutate: breakRule(&poison, tenantARule), serving: sink})
	c := e.sotw(seedNode())
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	c.recv()

	wantRefused := []model.RefusedResource{{Type: "route", Name: "http.80/" + tenantAVH + "/" + tenantARule}}
	refusedOf := func(rs []model.RefusedResource) []model.RefusedResource {
		var out []model.RefusedResource
		for _, r := range rs {
			if !strings.Contains(r.Error, `request header "x-discount": unescaped '%'`) {
				t.Errorf("refusal error %q", r.Error)
			}
			r.Error = ""
			out = append(out, r)
		}
		return out
	}
	got := sink.GetKey(seedGatewayKey)
	if got == nil {
		t.Fatal("no GatewayServing for the Gateway")
	}
	if d := cmp.Diff(wantRefused, refusedOf(got.Refused)); d != "" {
		t.Errorf("sink (-want +got):\n%s", d)
	}
	if sink.GetKey("other-ns/other-gw") != nil {
		t.Error("the other Gateway has a GatewayServing")
	}
	if st := syncz(t, e)[seedNode().GetId()]; cmp.Diff(wantRefused, refusedOf(st.Refused)) != "" {
		t.Errorf("syncz refused: %+v", st)
	}
	if v, ok := gaugeValue(t, e, "infermesh_xds_gateway_invalid_resources", seedGatewayKey); !ok || v != 1 {
		t.Errorf("gauge = %v (present %v), want 1", v, ok)
	}
	if code, body := getBody(t, e, "/healthz/config"); code != http.StatusServiceUnavailable || body != seedGatewayKey+": 1 refused\n" {
		t.Errorf("/healthz/config = %d %q", code, body)
	}
	if code := httpGet(t, e, "/ready"); code != http.StatusOK {
		t.Errorf("/ready = %d while serving in part", code)
	}

	poison.Store(false)
	e.gateways.UpdateObject(twoTenants("b2.example.com"))
	waitFor(t, "the refusal cleared", func() bool { return sink.GetKey(seedGatewayKey) == nil })
	if st := syncz(t, e)[seedNode().GetId()]; st.Refused != nil {
		t.Errorf("syncz after the fix: %+v", st)
	}
	if _, ok := gaugeValue(t, e, "infermesh_xds_gateway_invalid_resources", seedGatewayKey); ok {
		t.Error("gauge still present after the fix")
	}
	if code, body := getBody(t, e, "/healthz/config"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz/config after the fix = %d %q", code, body)
	}
}
