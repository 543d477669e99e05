// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/dataplane"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// headerGateway has two HTTPRoutes on listener http:80:
//
//   - hdr.example.com → Service a, whose rule sets Host and literal values
//     with '%' on the request, removes Host (Envoy refuses that; left out),
//     and adds a response header with '%';
//   - split.example.com → Services a and b, one half each, where a's
//     backendRef sets Host.
func headerGateway() model.Gateway {
	svc := func(name string, filters ...gwv1.HTTPRouteFilter) model.Backend {
		return model.Backend{Weight: 1, Service: &model.ServiceBackend{Host: name + ".ns.svc.cluster.local", Port: 80}, HTTPFilters: filters}
	}
	h := func(n, v string) gwv1.HTTPHeader { return gwv1.HTTPHeader{Name: gwv1.HTTPHeaderName(n), Value: v} }
	route := func(name string, rule model.Rule) *model.Route {
		if rule.HTTP == nil {
			rule.HTTP = &gwv1.HTTPRouteRule{}
		}
		return &model.Route{Kind: "HTTPRoute", Namespace: "ns", Name: name, Hostnames: []string{name + ".example.com"},
			CreationTimestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Rules: []model.Rule{rule}}
	}
	hdr := route("hdr", model.Rule{
		HTTP: &gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{
			{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
				Set: []gwv1.HTTPHeader{h("Host", "upstream.internal"), h("X-Test-Discount", "100%")},
				Add: []gwv1.HTTPHeader{h("X-Test-Template", "%START_TIME%")},
			}},
			{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{
				Add: []gwv1.HTTPHeader{h("X-Off", "50% off")},
			}},
		}},
		Backends: []model.Backend{svc("a")},
	})
	split := route("split", model.Rule{Backends: []model.Backend{
		svc("a", gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
			Set: []gwv1.HTTPHeader{h("Host", "share-a.internal")},
		}}),
		svc("b"),
	}})
	return model.Gateway{Namespace: "gateway-namespace", Name: "gateway", Listeners: []model.Listener{{
		Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Routes: []*model.Route{hdr, split},
	}}}
}

// Header modifiers end to end: pilot's translation of Host and of values
// with '%' passes core.Validate and is accepted by the data plane (which
// refuses, as Envoy does, host headers and bad substitution formats), and
// the upstream sees the Host and the values exactly as the user wrote
// them.
func TestEndToEndHeaderModifiers(t *testing.T) {
	ctx := testCtx(t)
	a, b := backend(t, "a"), backend(t, "b")
	servers := map[string]string{"10.0.0.1:8080": a.Listener.Addr().String(), "10.0.0.2:8080": b.Listener.Addr().String()}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveXDS(t, lis, headerGateway(), []model.ClusterEndpoints{
		{Cluster: core.ClusterName(80, "a.ns.svc.cluster.local"), Endpoints: []model.Endpoint{{Address: "10.0.0.1", Port: 8080}}},
		{Cluster: core.ClusterName(80, "b.ns.svc.cluster.local"), Endpoints: []model.Endpoint{{Address: "10.0.0.2", Port: 8080}}},
	})
	dp := runDP(t, testBootstrap(t, lis.Addr().String(), false), servers, dataplane.Options{Rand: rand.New(rand.NewPCG(3, 4))})

	if err := dp.WaitFor(ctx, func(s dataplane.Snapshot) bool {
		return s.Listeners["0.0.0.0_80"] != nil || s.LastNACK != nil
	}); err != nil {
		t.Fatalf("the listener never warmed (pilot published nothing: core.Validate refused the set?): %v", err)
	}
	if s := dp.Snapshot(); s.LastNACK != nil {
		t.Fatalf("data plane NACKed pilot's %s: %s", s.LastNACK.TypeURL, s.LastNACK.Message)
	}

	resp := get(t, dp, 80, "GET", "hdr.example.com", "/", nil)
	if resp.StatusCode != 200 || bodyOf(resp) != "a" {
		t.Fatalf("hdr: %d %q", resp.StatusCode, bodyOf(resp))
	}
	for k, want := range map[string]string{
		"x-seen-host":          "upstream.internal",
		"Seen-X-Test-Discount": "100%",
		"Seen-X-Test-Template": "%START_TIME%",
		"X-Off":                "50% off",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("hdr: %s = %q, want %q", k, got, want)
		}
	}

	seen := map[string]int{}
	for range 40 {
		resp := get(t, dp, 80, "GET", "split.example.com", "/", nil)
		want := map[string]string{"a": "share-a.internal", "b": "split.example.com"}[bodyOf(resp)]
		if got := resp.Header.Get("x-seen-host"); resp.StatusCode != 200 || got != want {
			t.Fatalf("split: %d from %q with upstream Host %q, want %q", resp.StatusCode, bodyOf(resp), got, want)
		}
		seen[bodyOf(resp)]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Fatalf("split: answers %v, want both backends", seen)
	}
}
