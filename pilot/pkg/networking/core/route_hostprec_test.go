// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"slices"
	"strings"
	"testing"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// TestHostnameIntersectionPrecedence: routes that meet in one virtual host
// through different hostnames are ordered by the route's own matching
// hostname before their matches (GatewayRouteHostnameIntersectionPrecedence):
// on listener abc.example.com, a newer route for abc.example.com with
// PathPrefix /path goes before an older route for *.example.com with the
// longer /path/prefix, and that one before a route for *.com; a route
// without hostnames goes last. The same on a wildcard listener, with the
// wildcards' lengths; and the incremental translator agrees.
func TestHostnameIntersectionPrecedence(t *testing.T) {
	at := func(r *model.Route, year int) *model.Route {
		r.CreationTimestamp = time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
		return r
	}
	rule := func(path, to string) model.Rule {
		return model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch(path)}}, Backends: backendTo(to)}
	}
	for _, c := range []struct {
		name     string
		listener string
		vh       string
		routes   []*model.Route
		want     []string
	}{
		{"exact listener", "abc.example.com", "abc.example.com:80", []*model.Route{
			at(httpRoute("ns", "none", nil, rule("/path/prefix/longer", "none")), 2019),
			at(httpRoute("ns", "com", []string{"*.com"}, rule("/path/prefix/longer", "com")), 2020),
			at(httpRoute("ns", "wild", []string{"*.example.com"}, rule("/path/prefix", "wild")), 2021),
			at(httpRoute("ns", "exact", []string{"abc.example.com"}, rule("/path", "exact")), 2022),
		}, []string{"exact", "wild", "com", "none"}},
		{"wildcard listener", "*.example.com", "*.example.com:80", []*model.Route{
			at(httpRoute("ns", "com", []string{"*.com"}, rule("/path/prefix", "com")), 2020),
			at(httpRoute("ns", "wild", []string{"other.net", "*.example.com"}, rule("/path", "wild")), 2022),
		}, []string{"wild", "com"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			gw := gateway(c.routes...)
			gw.Listeners[0].Hostname = c.listener
			got := func(res Resources) []string {
				var names []string
				for _, r := range routesOf(t, res, RouteConfigName(80, false), c.vh) {
					names = append(names, strings.TrimSuffix(strings.TrimPrefix(r.GetName(), "ns."), ".0"))
				}
				return names
			}
			if names := got(build(t, gw, Inputs{}, Options{})); !slices.Equal(names, c.want) {
				t.Errorf("full translation: routes %v, want %v", names, c.want)
			}
			res, err := NewTranslator(Options{}).Build(gw, Inputs{})
			if err != nil {
				t.Fatal(err)
			}
			if names := got(res); !slices.Equal(names, c.want) {
				t.Errorf("incremental translation: routes %v, want %v", names, c.want)
			}
		})
	}
}
