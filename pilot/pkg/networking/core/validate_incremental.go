// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// SetValidator validates the successive sets of one Gateway, each resource
// version once: it keeps the last set that passed and, for a new set,
// checks only the messages that are not in it (a message is its version:
// the translator keeps the message of what did not change,
// core.Translator), plus the cross-resource rules the change can affect.
//
// Valid(res) is true exactly when Validate(res) would return nil, given
// that res.Endpoints holds, for every EDS cluster, one valid assignment
// (the push path's precondition: it validates each assignment when it is
// set and supplies the empty one for a name without endpoints); Valid
// does not look at res.Endpoints. A false answer changes nothing: the
// caller then runs Validate and ValidSubset on the whole set, and the
// next Valid compares with the last set that passed.
//
// Cross-resource rules: names unique per type (sorted lists: a new
// message is checked against its neighbours); every RDS name of a
// listener is a route configuration; every cluster a listener's ext_proc
// filter, a route or a per-route ext_proc override names exists (new
// virtual hosts are looked up in the new cluster list; a removed cluster
// must not be named by any virtual host, counted per name); header
// mutations at every level.
//
// Not safe for concurrent use.
type SetValidator struct {
	ok bool // a set passed
	// listeners are the last set's, with what each needs.
	listeners []*listenerv3.Listener
	lisNeeds  []listenerNeeds
	clusters  []*clusterv3.Cluster
	rcs       map[string]*rcValid
	// refs counts, per cluster name, the virtual hosts of the last set
	// that name it.
	refs map[string]int
}

// listenerNeeds are the clusters a listener's ext_proc filters call.
type listenerNeeds struct {
	clusters []string
}

// rcValid is one route configuration that passed: its virtual hosts and
// the clusters each names.
type rcValid struct {
	rc     *routev3.RouteConfiguration
	vhosts []*routev3.VirtualHost
	refs   [][]string
}

// Valid reports whether res passes Validate (see SetValidator); when it
// does, res becomes the set the next call compares with.
func (v *SetValidator) Valid(res Resources) bool {
	memo := anyMemo{}
	// Clusters: sorted, unique, each new one valid.
	var removed []string
	if !v.ok || !sameSlice(res.Clusters, v.clusters) {
		var ok bool
		removed, ok = v.checkClusters(res.Clusters, memo)
		if !ok {
			return false
		}
	}
	hasCluster := func(name string) bool {
		if name == ExtProcPlaceholderCluster || name == InvalidBackendCluster {
			return true
		}
		_, found := slices.BinarySearchFunc(res.Clusters, name, func(c *clusterv3.Cluster, n string) int { return strings.Compare(c.GetName(), n) })
		return found
	}
	rcNames := map[string]bool{}
	for _, rc := range res.Routes {
		rcNames[rc.GetName()] = true
	}
	if len(rcNames) != len(res.Routes) {
		return false
	}
	// Listeners (a few): unique names, each new one valid, its RDS names
	// present, the clusters its ext_proc filters call (checked below).
	lisNeeds := make([]listenerNeeds, len(res.Listeners))
	names := map[string]bool{}
	for i, l := range res.Listeners {
		if names[l.GetName()] {
			return false
		}
		names[l.GetName()] = true
		if v.ok && i < len(v.listeners) && v.listeners[i] == l {
			lisNeeds[i] = v.lisNeeds[i]
			continue
		}
		if validateDeep(l, memo) != nil {
			return false
		}
		failed := false
		var needs listenerNeeds
		checkListenerRefs(l, memo, rcNames, func(_, c string) { needs.clusters = append(needs.clusters, c) },
			func(string, ...any) { failed = true })
		if failed {
			return false
		}
		lisNeeds[i] = needs
	}
	for _, n := range lisNeeds {
		for _, c := range n.clusters {
			if !hasCluster(c) {
				return false
			}
		}
	}
	// Route configurations: each new one's own fields, each new virtual
	// host, their cluster references.
	delta := map[string]int{}
	next := make(map[string]*rcValid, len(res.Routes))
	for _, rc := range res.Routes {
		last := v.rcs[rc.GetName()]
		if v.ok && last != nil && last.rc == rc {
			next[rc.GetName()] = last
			continue
		}
		rv, ok := checkRouteConfiguration(rc, last, memo, hasCluster, delta)
		if !ok {
			return false
		}
		next[rc.GetName()] = rv
	}
	if v.ok {
		for name, last := range v.rcs {
			if next[name] == nil {
				for _, refs := range last.refs {
					for _, c := range refs {
						delta[c]--
					}
				}
			}
		}
	}
	for _, c := range removed {
		if v.refs[c]+delta[c] > 0 {
			return false
		}
	}
	// Passed: this set is the next baseline.
	if !v.ok {
		v.refs = map[string]int{}
	}
	for c, d := range delta {
		if n := v.refs[c] + d; n > 0 {
			v.refs[c] = n
		} else {
			delete(v.refs, c)
		}
	}
	v.ok, v.listeners, v.lisNeeds, v.clusters, v.rcs = true, res.Listeners, lisNeeds, res.Clusters, next
	return true
}

// checkClusters checks a new cluster list against the last: sorted by
// name and unique (the last one was, so each message not in it is checked
// against its neighbours), each new message valid. removed are the names
// of the last list not in the new one.
func (v *SetValidator) checkClusters(cs []*clusterv3.Cluster, memo anyMemo) (removed []string, ok bool) {
	var old []*clusterv3.Cluster
	if v.ok {
		old = v.clusters
	}
	i := 0
	for j, c := range cs {
		if i < len(old) && old[i] == c {
			i++
			continue
		}
		if j > 0 && strings.Compare(cs[j-1].GetName(), c.GetName()) >= 0 {
			return nil, false
		}
		if j+1 < len(cs) && strings.Compare(c.GetName(), cs[j+1].GetName()) >= 0 {
			return nil, false
		}
		for i < len(old) && old[i].GetName() < c.GetName() {
			removed = append(removed, old[i].GetName())
			i++
		}
		if i < len(old) && old[i].GetName() == c.GetName() {
			i++ // replaced
		}
		if validateDeep(c, memo) != nil {
			return nil, false
		}
	}
	for ; i < len(old); i++ {
		removed = append(removed, old[i].GetName())
	}
	return removed, true
}

// checkRouteConfiguration checks rc, whose last version that passed is
// last (nil if none): its own fields (all but virtual_hosts) and each
// virtual host last did not have, whose clusters must exist; delta gets
// the change of references per cluster name.
func checkRouteConfiguration(rc *routev3.RouteConfiguration, last *rcValid, memo anyMemo,
	hasCluster func(string) bool, delta map[string]int,
) (*rcValid, bool) {
	if validateDeep(withoutVirtualHosts(rc), memo) != nil {
		return nil, false
	}
	failed := false
	checkHeaderLists("", rc, func(string, ...any) { failed = true })
	if failed {
		return nil, false
	}
	rv := &rcValid{rc: rc, vhosts: rc.GetVirtualHosts(), refs: make([][]string, len(rc.GetVirtualHosts()))}
	var oldVH []*routev3.VirtualHost
	var oldRefs [][]string
	if last != nil {
		oldVH, oldRefs = last.vhosts, last.refs
	}
	used := make([]bool, len(oldVH))
	i := 0
	for j, vh := range rc.GetVirtualHosts() {
		if k := findNear(oldVH, i, vh); k >= 0 {
			rv.refs[j] = oldRefs[k]
			used[k] = true
			i = k + 1
			continue
		}
		refs, ok := checkVirtualHost(vh, memo, hasCluster)
		if !ok {
			return nil, false
		}
		rv.refs[j] = refs
		for _, c := range refs {
			delta[c]++
		}
	}
	for k, u := range used {
		if !u {
			for _, c := range oldRefs[k] {
				delta[c]--
			}
		}
	}
	return rv, true
}

// findNear is the index of vh in old at i or a few places after, -1 when
// not there (a virtual host inserted or removed shifts the rest by a few).
func findNear(old []*routev3.VirtualHost, i int, vh *routev3.VirtualHost) int {
	for k := i; k < len(old) && k < i+4; k++ {
		if old[k] == vh {
			return k
		}
	}
	return -1
}

// checkVirtualHost checks one virtual host (Validate's rules 1, 4 and 6
// for it) and returns the clusters it names.
func checkVirtualHost(vh *routev3.VirtualHost, memo anyMemo, hasCluster func(string) bool) ([]string, bool) {
	if validateDeep(vh, memo) != nil {
		return nil, false
	}
	failed := false
	fail := func(string, ...any) { failed = true }
	checkHeaderLists("", vh, fail)
	var refs []string
	need := func(_, c string) {
		if c == ExtProcPlaceholderCluster || c == InvalidBackendCluster {
			return
		}
		if !hasCluster(c) {
			failed = true
		}
		if !slices.Contains(refs, c) {
			refs = append(refs, c)
		}
	}
	for _, r := range vh.GetRoutes() {
		checkHeaderLists("", r, fail)
		for _, cw := range r.GetRoute().GetWeightedClusters().GetClusters() {
			checkHeaderLists("", cw, fail)
		}
		checkRouteRefs("", r, memo, need, fail)
	}
	return refs, !failed
}

// withoutVirtualHosts is a message with rc's fields but virtual_hosts
// (sharing their values).
func withoutVirtualHosts(rc *routev3.RouteConfiguration) *routev3.RouteConfiguration {
	out := &routev3.RouteConfiguration{}
	dst := out.ProtoReflect()
	rc.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		if fd.Number() != routeConfigVirtualHostsField {
			dst.Set(fd, val)
		}
		return true
	})
	return out
}

// routeConfigVirtualHostsField is RouteConfiguration.virtual_hosts's field
// number (envoy/config/route/v3/route.proto).
const routeConfigVirtualHostsField = 2
