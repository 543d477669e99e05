// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// Two tenants' routes on one host of one listener: route configuration
// http.80, virtual host shared.example.com:80.
const (
	sharedVH     = "shared.example.com:80"
	tenantARoute = "team-a.route-a.0"
	tenantBRoute = "team-b.route-b.0"
	tenantBSvc   = "outbound|8080||svc-b.team-b.svc.cluster.local"
)

func twoTenants(t *testing.T) Resources {
	t.Helper()
	gw := gateway(
		httpRoute("team-a", "route-a", []string{"shared.example.com"}, model.Rule{
			HTTP:     &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/a")}},
			Backends: []model.Backend{{Weight: 1, Service: svc("team-a", "svc-a", 8080)}},
		}),
		httpRoute("team-b", "route-b", []string{"shared.example.com"}, model.Rule{
			HTTP:     &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/b")}},
			Backends: []model.Backend{{Weight: 1, Service: svc("team-b", "svc-b", 8080)}},
		}),
	)
	return build(t, gw, Inputs{}, inferenceOn)
}

// breakRoute adds a header value Envoy's formatter refuses to the named
// route of the shared virtual host.
func breakRoute(t *testing.T, res Resources, name string) {
	t.Helper()
	for _, r := range routesOf(t, res, "http.80", sharedVH) {
		if r.GetName() == name {
			r.RequestHeadersToAdd = append(r.RequestHeadersToAdd, addOption("x-discount", "100%"))
			return
		}
	}
	t.Fatalf("no route %s", name)
}

func routeNames(t *testing.T, res Resources) []string {
	t.Helper()
	var out []string
	for _, r := range routesOf(t, res, "http.80", sharedVH) {
		out = append(out, r.GetName())
	}
	return out
}

func refusalSummary(rs []Refusal) []string {
	var out []string
	for _, r := range rs {
		s := r.Type + " " + r.Name
		if r.LastGood {
			s += " (last good)"
		} else {
			s += " (left out)"
		}
		out = append(out, s)
	}
	return out
}

// TestValidSubsetLeavesOutOneRule: with no last good version, one
// tenant's invalid rule is left out and the other tenant's is served; the
// listener, route configuration and clusters stay.
func TestValidSubsetLeavesOutOneRule(t *testing.T) {
	res := clone(twoTenants(t))
	breakRoute(t, res, tenantARoute)
	if Validate(res) == nil {
		t.Fatal("the broken set passes Validate")
	}
	got, refused := ValidSubset(res, Resources{})
	assertValid(t, got)
	if d := cmp.Diff([]string{tenantBRoute}, routeNames(t, got)); d != "" {
		t.Errorf("routes served (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"route http.80/" + sharedVH + "/" + tenantARoute + " (left out)"}, refusalSummary(refused)); d != "" {
		t.Errorf("refusals (-want +got):\n%s", d)
	}
	if !strings.Contains(refused[0].Err.Error(), `request header "x-discount": unescaped '%'`) {
		t.Errorf("error %v", refused[0].Err)
	}
	if len(got.Listeners) != 1 || len(got.Clusters) != len(res.Clusters) {
		t.Errorf("got %d listeners, %d of %d clusters", len(got.Listeners), len(got.Clusters), len(res.Clusters))
	}
	// Deterministic, and res untouched.
	again, refused2 := ValidSubset(res, Resources{})
	if !proto.Equal(got.Routes[0], again.Routes[0]) || len(refused2) != len(refused) {
		t.Error("a second run differs")
	}
	if len(routesOf(t, res, "http.80", sharedVH)) != 2 {
		t.Error("ValidSubset modified its input")
	}
}

// TestValidSubsetKeepsLastGoodRule: a rule whose matches are unchanged
// keeps its last good entries, in place; tenant B's change is served.
func TestValidSubsetKeepsLastGoodRule(t *testing.T) {
	last := twoTenants(t)
	res := clone(last)
	breakRoute(t, res, tenantARoute)
	for _, r := range routesOf(t, res, "http.80", sharedVH) {
		if r.GetName() == tenantBRoute {
			r.RequestHeadersToAdd = append(r.RequestHeadersToAdd, addOption("x-new", "b"))
		}
	}
	got, refused := ValidSubset(res, last)
	assertValid(t, got)
	rs := routesOf(t, got, "http.80", sharedVH)
	if d := cmp.Diff([]string{tenantARoute, tenantBRoute}, routeNames(t, got)); d != "" {
		t.Fatalf("routes (-want +got):\n%s", d)
	}
	lastA := routesOf(t, last, "http.80", sharedVH)[0]
	if !proto.Equal(rs[0], lastA) {
		t.Error("tenant A's route is not its last good version")
	}
	if len(rs[1].GetRequestHeadersToAdd()) == 0 {
		t.Error("tenant B's change is not served")
	}
	if d := cmp.Diff([]string{"route http.80/" + sharedVH + "/" + tenantARoute + " (last good)"}, refusalSummary(refused)); d != "" {
		t.Errorf("refusals (-want +got):\n%s", d)
	}

	// A rule whose matches changed cannot take its old place: left out.
	moved := clone(res)
	routesOf(t, moved, "http.80", sharedVH)[0].Match = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/other"}}
	got, refused = ValidSubset(moved, last)
	assertValid(t, got)
	if d := cmp.Diff([]string{tenantBRoute}, routeNames(t, got)); d != "" {
		t.Errorf("routes after a match change (-want +got):\n%s", d)
	}
	if len(refused) != 1 || refused[0].LastGood {
		t.Errorf("refusals %v", refusalSummary(refused))
	}
}

// TestValidSubsetDanglingReferences: a cluster left out takes the rules
// that send to it; a route configuration left out takes its listener; a
// last good version is preferred at each level.
func TestValidSubsetDanglingReferences(t *testing.T) {
	good := twoTenants(t)
	badCluster := func(r Resources) {
		for _, c := range r.Clusters {
			if c.GetName() == tenantBSvc {
				c.ConnectTimeout = durationpb.New(-time.Second)
			}
		}
	}

	res := clone(good)
	badCluster(res)
	got, refused := ValidSubset(res, Resources{})
	assertValid(t, got)
	if d := cmp.Diff([]string{tenantARoute}, routeNames(t, got)); d != "" {
		t.Errorf("routes (-want +got):\n%s", d)
	}
	want := []string{"cluster " + tenantBSvc + " (left out)", "route http.80/" + sharedVH + "/" + tenantBRoute + " (left out)"}
	if d := cmp.Diff(want, refusalSummary(refused)); d != "" {
		t.Errorf("refusals (-want +got):\n%s", d)
	}

	got, refused = ValidSubset(res, good)
	assertValid(t, got)
	if d := cmp.Diff([]string{"cluster " + tenantBSvc + " (last good)"}, refusalSummary(refused)); d != "" {
		t.Errorf("refusals with a last good cluster (-want +got):\n%s", d)
	}
	if len(routeNames(t, got)) != 2 {
		t.Errorf("routes %v", routeNames(t, got))
	}

	// The route configuration's own fields invalid: without a last good
	// version, it and its listener are left out; with one, both stay.
	res = clone(good)
	res.Routes[0].RequestHeadersToRemove = []string{":path"}
	got, refused = ValidSubset(res, Resources{})
	assertValid(t, got)
	want = []string{"route configuration http.80 (left out)", "listener 0.0.0.0_80 (left out)"}
	if d := cmp.Diff(want, refusalSummary(refused)); d != "" {
		t.Errorf("refusals (-want +got):\n%s", d)
	}
	if len(got.Listeners) != 0 || len(got.Routes) != 0 || len(got.Clusters) != len(good.Clusters) {
		t.Errorf("served %d listeners, %d route configurations, %d clusters", len(got.Listeners), len(got.Routes), len(got.Clusters))
	}
	got, refused = ValidSubset(res, good)
	assertValid(t, got)
	if d := cmp.Diff([]string{"route configuration http.80 (last good)"}, refusalSummary(refused)); d != "" {
		t.Errorf("refusals with a last good route configuration (-want +got):\n%s", d)
	}
	if len(got.Listeners) != 1 || !proto.Equal(got.Routes[0], good.Routes[0]) {
		t.Error("the last good route configuration and its listener are not served")
	}

	// An EDS cluster without its assignment is left out.
	res = clone(good)
	res.Endpoints = res.Endpoints[1:]
	got, refused = ValidSubset(res, Resources{})
	assertValid(t, got)
	if len(refused) == 0 || refused[0].Type != "cluster" || !strings.Contains(refused[0].Err.Error(), "no ClusterLoadAssignment") {
		t.Errorf("refusals %v", refusalSummary(refused))
	}
}
