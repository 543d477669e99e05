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
	// vhRefs are the clusters each virtual host of the last set names, by
	// message: a cache (the names are a function of the message; a miss
	// reads them again), so that a new version of a route configuration
	// costs its new and removed virtual hosts, not a list as long as all
	// of them.
	vhRefs map[*routev3.VirtualHost][]string
}

// listenerNeeds are the clusters a listener's ext_proc filters call.
type listenerNeeds struct {
	clusters []string
}

// rcValid is one route configuration that passed (its virtual hosts),
// or is checked: then also the virtual hosts it has and its last version
// had not (with the clusters each names), and the reverse, for vhRefs.
type rcValid struct {
	rc     *routev3.RouteConfiguration
	vhosts []*routev3.VirtualHost
	added  map[*routev3.VirtualHost][]string
	gone   []*routev3.VirtualHost
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
		rv, ok := checkRouteConfiguration(rc, last, memo, hasCluster, delta, v.refsOf)
		if !ok {
			return false
		}
		next[rc.GetName()] = rv
	}
	var gone [][]*routev3.VirtualHost
	if v.ok {
		for name, last := range v.rcs {
			if next[name] == nil {
				for _, vh := range last.vhosts {
					for _, c := range v.refsOf(vh, memo) {
						delta[c]--
					}
				}
				gone = append(gone, last.vhosts)
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
		v.vhRefs = map[*routev3.VirtualHost][]string{}
	}
	for _, vhs := range gone {
		for _, vh := range vhs {
			delete(v.vhRefs, vh)
		}
	}
	for _, rv := range next {
		for _, vh := range rv.gone {
			delete(v.vhRefs, vh)
		}
		for vh, refs := range rv.added {
			v.vhRefs[vh] = refs
		}
		rv.added, rv.gone = nil, nil
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
// the change of references per cluster name (refsOf gives those of a
// virtual host of last).
func checkRouteConfiguration(rc *routev3.RouteConfiguration, last *rcValid, memo anyMemo,
	hasCluster func(string) bool, delta map[string]int, refsOf func(*routev3.VirtualHost, anyMemo) []string,
) (*rcValid, bool) {
	if validateDeep(withoutVirtualHosts(rc), memo) != nil {
		return nil, false
	}
	failed := false
	checkHeaderLists("", rc, func(string, ...any) { failed = true })
	if failed {
		return nil, false
	}
	rv := &rcValid{rc: rc, vhosts: rc.GetVirtualHosts(), added: map[*routev3.VirtualHost][]string{}}
	var oldVH []*routev3.VirtualHost
	if last != nil {
		oldVH = last.vhosts
	}
	// Virtual hosts of last that the walk passes over are not in rc.
	drop := func(vhs []*routev3.VirtualHost) {
		for _, vh := range vhs {
			for _, c := range refsOf(vh, memo) {
				delta[c]--
			}
			rv.gone = append(rv.gone, vh)
		}
	}
	i := 0
	for _, vh := range rc.GetVirtualHosts() {
		if k := findNear(oldVH, i, vh); k >= 0 {
			drop(oldVH[i:k])
			i = k + 1
			continue
		}
		refs, ok := checkVirtualHost(vh, memo, hasCluster)
		if !ok {
			return nil, false
		}
		rv.added[vh] = refs
		for _, c := range refs {
			delta[c]++
		}
	}
	drop(oldVH[i:])
	return rv, true
}

// refsOf are the clusters vh names (checkVirtualHost's list), from the
// cache or read again.
func (v *SetValidator) refsOf(vh *routev3.VirtualHost, memo anyMemo) []string {
	if refs, ok := v.vhRefs[vh]; ok {
		return refs
	}
	return clusterRefs(vh, memo, func(string, ...any) {})
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
	for _, r := range vh.GetRoutes() {
		checkHeaderLists("", r, fail)
		for _, cw := range r.GetRoute().GetWeightedClusters().GetClusters() {
			checkHeaderLists("", cw, fail)
		}
	}
	refs := clusterRefs(vh, memo, fail)
	for _, c := range refs {
		if !hasCluster(c) {
			failed = true
		}
	}
	return refs, !failed
}

// clusterRefs are the clusters vh's routes name (checkRouteRefs; not the
// placeholder clusters), each once, in order.
func clusterRefs(vh *routev3.VirtualHost, memo anyMemo, fail func(string, ...any)) []string {
	var refs []string
	need := func(_, c string) {
		if c != ExtProcPlaceholderCluster && c != InvalidBackendCluster && !slices.Contains(refs, c) {
			refs = append(refs, c)
		}
	}
	for _, r := range vh.GetRoutes() {
		checkRouteRefs("", r, memo, need, fail)
	}
	return refs
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
