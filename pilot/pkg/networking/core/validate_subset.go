// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"errors"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
)

// Refusal is one part of a Gateway's translation that ValidSubset does not
// serve as translated.
type Refusal struct {
	// Type is what was refused: "listener", "route configuration",
	// "virtual host", "route" (every entry of one route rule in one virtual
	// host: the translator names them "<namespace>.<route>.<rule index>"),
	// "cluster" or "cluster load assignment".
	Type string
	// Name is the resource name; "<route configuration>/<virtual host>" for
	// a virtual host, "<route configuration>/<virtual host>/<route name>"
	// for a route.
	Name string
	// LastGood is true when the last good version is served in its place,
	// false when it is left out.
	LastGood bool
	// Err is why, in Validate's terms.
	Err error
}

// ValidSubset is what of res can be served when Validate(res) fails: every
// part that passes Validate's rules, the last good version of a part that
// does not (from last, the set last served for the same proxy, which
// passed Validate; empty when there is none), and nothing that would refer
// to a part left out. The result passes Validate, barring a bug here:
// callers still run Validate on it. Refusals lists, in the order of res,
// what was replaced or left out.
//
// Units, from the bottom up (a part is checked against the parts below it
// that were kept):
//
//   - a ClusterLoadAssignment: left out when invalid (the push path keeps
//     assignments per cluster and hands in the last good one);
//   - a cluster: invalid, or an EDS cluster without an assignment: its last
//     good version if that passes, else left out;
//   - a route configuration: when its own fields (not its virtual hosts)
//     are invalid, its last good version is the base, else it is left out;
//     then per virtual host of the base, the same with the virtual host's
//     own fields and the last good virtual host of that name; then per
//     route rule (the entries sharing a route name) of the virtual host: a
//     rule with an invalid entry, or an entry naming a cluster not kept,
//     keeps its last good entries when the last good virtual host has the
//     same number of entries of that name with equal matches (the
//     translator orders entries by their matches, so they take the same
//     places), else its entries are left out;
//   - a listener: invalid, or naming a route configuration or ext_proc
//     cluster not kept: its last good version if that passes, else left out.
//
// Duplicate names keep the first resource and leave out the others.
// ValidSubset is pure: res and last are not modified; parts that change are
// copies.
func ValidSubset(res, last Resources) (Resources, []Refusal) {
	s := &subset{memo: anyMemo{}}
	var out Resources
	eps := map[string]bool{}
	for _, e := range res.Endpoints {
		n := e.GetClusterName()
		err := s.errs(func(fail func(string, ...any)) {
			if err := validateDeep(e, s.memo); err != nil {
				fail("cluster load assignment %q: %w", n, err)
			}
		})
		if eps[n] {
			err = fmt.Errorf("cluster load assignment %q: duplicate name", n)
		}
		if err != nil {
			s.refuse("cluster load assignment", n, false, err)
			continue
		}
		eps[n] = true
		out.Endpoints = append(out.Endpoints, e)
	}
	clusters := map[string]bool{}
	out.Clusters = pickEach(s, "cluster", res.Clusters, last.Clusters, clusters, (*clusterv3.Cluster).GetName,
		func(c *clusterv3.Cluster) error {
			return s.errs(func(fail func(string, ...any)) {
				if err := validateDeep(c, s.memo); err != nil {
					fail("cluster %q: %w", c.GetName(), err)
				}
				checkEDSRef(c, eps, fail)
			})
		})
	routes := map[string]bool{}
	lastRoutes := byName(last.Routes, (*routev3.RouteConfiguration).GetName)
	for _, rc := range res.Routes {
		n := rc.GetName()
		if routes[n] {
			s.refuse("route configuration", n, false, fmt.Errorf("route configuration %q: duplicate name", n))
			continue
		}
		if kept := s.routeConfig(rc, lastRoutes[n], clusters); kept != nil {
			routes[n] = true
			out.Routes = append(out.Routes, kept)
		}
	}
	out.Listeners = pickEach(s, "listener", res.Listeners, last.Listeners, map[string]bool{}, (*listenerv3.Listener).GetName,
		func(l *listenerv3.Listener) error {
			return s.errs(func(fail func(string, ...any)) {
				if err := validateDeep(l, s.memo); err != nil {
					fail("listener %q: %w", l.GetName(), err)
				}
				checkListenerRefs(l, s.memo, routes, clusterNeeds(clusters, fail), fail)
			})
		})
	return out, s.refused
}

// subset is one ValidSubset run.
type subset struct {
	memo    anyMemo
	refused []Refusal
}

func (s *subset) refuse(typ, name string, lastGood bool, err error) {
	s.refused = append(s.refused, Refusal{Type: typ, Name: name, LastGood: lastGood, Err: err})
}

// errs runs check with a fail function and returns what it reported.
func (s *subset) errs(check func(fail func(string, ...any))) error {
	var errs []error
	check(func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) })
	return errors.Join(errs...)
}

// pickEach keeps each resource of cur that passes check, or else the
// resource of the same name in last when it passes; kept collects the names
// kept.
func pickEach[T proto.Message](s *subset, typ string, cur, last []T, kept map[string]bool,
	name func(T) string, check func(T) error,
) []T {
	lastByName := byName(last, name)
	var out []T
	for _, r := range cur {
		n := name(r)
		if kept[n] {
			s.refuse(typ, n, false, fmt.Errorf("%s %q: duplicate name", typ, n))
			continue
		}
		err := check(r)
		if err == nil {
			kept[n] = true
			out = append(out, r)
			continue
		}
		if l, ok := lastByName[n]; ok && check(l) == nil {
			s.refuse(typ, n, true, err)
			kept[n] = true
			out = append(out, l)
			continue
		}
		s.refuse(typ, n, false, err)
	}
	return out
}

func byName[T any](list []T, name func(T) string) map[string]T {
	m := make(map[string]T, len(list))
	for _, r := range list {
		if _, dup := m[name(r)]; !dup {
			m[name(r)] = r
		}
	}
	return m
}

// routeConfig is what of rc is served (see ValidSubset), nil for nothing.
// last is the last good route configuration of that name, or nil.
func (s *subset) routeConfig(rc, last *routev3.RouteConfiguration, clusters map[string]bool) *routev3.RouteConfiguration {
	base := rc
	if err := s.rcOwnErr(rc); err != nil {
		if last == nil {
			s.refuse("route configuration", rc.GetName(), false, err)
			return nil
		}
		s.refuse("route configuration", rc.GetName(), true, err)
		base = last
	}
	var lastVHs map[string]*routev3.VirtualHost
	if last != nil {
		lastVHs = byName(last.GetVirtualHosts(), (*routev3.VirtualHost).GetName)
	}
	changed := false
	vhs := make([]*routev3.VirtualHost, 0, len(base.GetVirtualHosts()))
	for _, vh := range base.GetVirtualHosts() {
		kept := s.virtualHost(rc.GetName(), vh, lastVHs[vh.GetName()], clusters)
		if kept != vh {
			changed = true
		}
		if kept != nil {
			vhs = append(vhs, kept)
		}
	}
	if !changed {
		return base
	}
	out := proto.Clone(base).(*routev3.RouteConfiguration)
	out.VirtualHosts = vhs
	return out
}

// rcOwnErr checks rc's own fields, without its virtual hosts.
func (s *subset) rcOwnErr(rc *routev3.RouteConfiguration) error {
	own := proto.Clone(rc).(*routev3.RouteConfiguration)
	own.VirtualHosts = nil
	return s.errs(func(fail func(string, ...any)) {
		owner := fmt.Sprintf("route configuration %q", rc.GetName())
		if err := validateDeep(own, s.memo); err != nil {
			fail("%s: %w", owner, err)
		}
		checkHeaderLists(owner, own, fail)
	})
}

// virtualHost is what of vh is served, nil for nothing; last is the last
// good virtual host of that name, or nil.
func (s *subset) virtualHost(rcName string, vh, last *routev3.VirtualHost, clusters map[string]bool) *routev3.VirtualHost {
	name := rcName + "/" + vh.GetName()
	owner := fmt.Sprintf("route configuration %q virtual host %q", rcName, vh.GetName())
	base := vh
	if err := s.vhOwnErr(owner, vh); err != nil {
		if last == nil || s.vhOwnErr(owner, last) != nil {
			s.refuse("virtual host", name, false, err)
			return nil
		}
		s.refuse("virtual host", name, true, err)
		base = last
	}
	routes, changed := s.routeRules(name, owner, base.GetRoutes(), last.GetRoutes(), clusters)
	if !changed {
		return base
	}
	out := proto.Clone(base).(*routev3.VirtualHost)
	out.Routes = routes
	return out
}

// vhOwnErr checks vh's own fields, without its routes.
func (s *subset) vhOwnErr(owner string, vh *routev3.VirtualHost) error {
	own := proto.Clone(vh).(*routev3.VirtualHost)
	own.Routes = nil
	return s.errs(func(fail func(string, ...any)) {
		if err := validateDeep(own, s.memo); err != nil {
			fail("%s: %w", owner, err)
		}
		checkHeaderLists(owner, own, fail)
	})
}

// routeRules is cur with each rule (the entries sharing a route name) that
// fails replaced by its entries in last (same count, equal matches, all
// passing) or left out; changed is false when cur is returned as is.
func (s *subset) routeRules(name, owner string, cur, last []*routev3.Route, clusters map[string]bool) ([]*routev3.Route, bool) {
	bad := map[string]error{}
	var order []string
	for _, r := range cur {
		if err := s.routeErr(owner, r, clusters); err != nil {
			if _, seen := bad[r.GetName()]; !seen {
				order = append(order, r.GetName())
			}
			bad[r.GetName()] = errors.Join(bad[r.GetName()], err)
		}
	}
	if len(bad) == 0 {
		return cur, false
	}
	subst := map[string][]*routev3.Route{}
	for _, n := range order {
		prev := entriesNamed(last, n)
		if s.sameMatches(entriesNamed(cur, n), prev, owner, clusters) {
			subst[n] = prev
			s.refuse("route", name+"/"+n, true, bad[n])
		} else {
			s.refuse("route", name+"/"+n, false, bad[n])
		}
	}
	var out []*routev3.Route
	next := map[string]int{}
	for _, r := range cur {
		n := r.GetName()
		if _, isBad := bad[n]; !isBad {
			out = append(out, r)
			continue
		}
		if prev, ok := subst[n]; ok {
			out = append(out, prev[next[n]])
			next[n]++
		}
	}
	return out, true
}

// sameMatches reports whether prev can stand in for cur: as many entries,
// equal matches in order, and every one passing.
func (s *subset) sameMatches(cur, prev []*routev3.Route, owner string, clusters map[string]bool) bool {
	if len(prev) == 0 || len(prev) != len(cur) {
		return false
	}
	for i := range prev {
		if !proto.Equal(cur[i].GetMatch(), prev[i].GetMatch()) || s.routeErr(owner, prev[i], clusters) != nil {
			return false
		}
	}
	return true
}

func entriesNamed(routes []*routev3.Route, name string) []*routev3.Route {
	var out []*routev3.Route
	for _, r := range routes {
		if r.GetName() == name {
			out = append(out, r)
		}
	}
	return out
}

// routeErr checks one route entry: Validate's rules 1, 4 and 6 for it and
// its weighted cluster entries.
func (s *subset) routeErr(owner string, r *routev3.Route, clusters map[string]bool) error {
	return s.errs(func(fail func(string, ...any)) {
		rOwner := fmt.Sprintf("%s route %q", owner, r.GetName())
		if err := validateDeep(r, s.memo); err != nil {
			fail("%s: %w", rOwner, err)
		}
		checkHeaderLists(rOwner, r, fail)
		for _, cw := range r.GetRoute().GetWeightedClusters().GetClusters() {
			checkHeaderLists(fmt.Sprintf("%s weighted cluster %q", rOwner, cw.GetName()), cw, fail)
		}
		checkRouteRefs(rOwner, r, s.memo, clusterNeeds(clusters, fail), fail)
	})
}
