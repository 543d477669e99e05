// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// The Translator's clusters: each kept with its spec, rebuilt only when a
// route referring to it changed (see Translator in incremental.go).

// clusterState is what the Translator keeps of the clusters.
type clusterState struct {
	// sig is the Gateway's listener hostnames and backend client
	// certificate.
	sig string
	// lists are, per listener, its routes' cluster references as last
	// translated.
	lists []routeList[clRoute]
	// refs are, per cluster name, the references to it in (listener,
	// route) order.
	refs map[string][]clRef
	// specs, msgs: each cluster's spec and message; sorted their names.
	specs  map[string]clusterSpec
	msgs   map[string]*clusterv3.Cluster
	sorted []string
	// eppTLS is the Inputs.EPPTLS the EPP clusters were built with.
	eppTLS map[string]*EPPTLS
	// eppUses counts the references to each EPP host; eppHosts are those
	// with some, sorted.
	eppUses  map[string]int
	eppHosts []string
	// eppDelta are the changes of eppUses counted during a diff.
	eppDelta map[string]int
	out      []*clusterv3.Cluster
}

type clRoute struct {
	r   *model.Route
	ops []clusterOp
}

type clRef struct {
	li  int
	r   *model.Route
	ops []clusterOp // the route's references to this name, in order
}

func clusterSig(gw *model.Gateway) string {
	b := strconv.AppendQuote(nil, gw.BackendClientCertificate)
	for _, l := range gw.Listeners {
		b = strconv.AppendQuote(b, l.Hostname)
	}
	return string(b)
}

func (t *Translator) buildClusters(gw *model.Gateway, inputs func([]string) Inputs) ([]*clusterv3.Cluster, error) {
	if t.packed == nil {
		p, err := newPackedClusterConfig()
		if err != nil {
			return nil, err
		}
		t.packed = &p
	}
	if hasListenerFilters(gw) {
		// Processor clusters come from listeners, not routes: a Gateway
		// with listener filters gets its clusters built whole.
		t.cl = nil
		return BuildClusters(gw, inputs(EPPHosts(gw)), t.opts)
	}
	sig := clusterSig(gw)
	st := t.cl
	if st == nil || st.sig != sig || len(st.lists) != len(gw.Listeners) {
		st = &clusterState{sig: sig, lists: make([]routeList[clRoute], len(gw.Listeners)), refs: map[string][]clRef{},
			specs: map[string]clusterSpec{}, msgs: map[string]*clusterv3.Cluster{}, eppUses: map[string]int{}}
		t.cl = st
	}
	changed := map[string]bool{}
	for li, l := range gw.Listeners {
		ok := st.lists[li].diff(l.Routes,
			func(o clRoute, r *model.Route) clRoute {
				if o.r != r {
					for _, op := range o.ops {
						st.setRefRoute(op.name, li, o.r, r)
					}
					o.r = r
				}
				return o
			},
			func(o *clRoute, r *model.Route) clRoute {
				if o != nil {
					st.dropRefs(o, li, changed)
				}
				nr := clRoute{r: r, ops: routeClusterOps(l.Hostname, r, t.opts)}
				st.addRefs(nr, li, changed)
				return nr
			},
			func(o clRoute) { st.dropRefs(&o, li, changed) })
		if !ok {
			t.cl = nil
			return BuildClusters(gw, inputs(EPPHosts(gw)), t.opts)
		}
	}
	st.applyEPP()
	in := inputs(st.eppHosts)
	// An EPP's TLS changed: its clusters are built again.
	if !sameEPPTLS(st.eppTLS, in.EPPTLS) {
		for n, s := range st.specs {
			if s.eppHost != "" && !sameTLS(st.eppTLS[s.eppHost], in.EPPTLS[s.eppHost]) {
				changed[n] = true
				delete(st.specs, n) // forces the rebuild below
			}
		}
		st.eppTLS = copyTLS(in.EPPTLS)
	}
	if len(changed) == 0 && st.out != nil {
		return st.out, nil
	}
	bulk := len(changed) > 16 && len(changed) > len(st.sorted)/8
	// out is a new list (the last one is shared with its readers), kept
	// aligned with sorted.
	var out []*clusterv3.Cluster
	modified := false
	modify := func() {
		if !modified {
			out, modified = slices.Clone(st.out), true
		}
	}
	for n := range changed {
		refs := st.refs[n]
		if len(refs) == 0 {
			if _, ok := st.msgs[n]; ok {
				delete(st.msgs, n)
				delete(st.specs, n)
				modify()
				if !bulk {
					if i, found := slices.BinarySearch(st.sorted, n); found {
						st.sorted = slices.Delete(st.sorted, i, i+1)
						out = slices.Delete(out, i, i+1)
					}
				}
			}
			continue
		}
		s := clusterSpec{name: n}
		for _, ref := range refs {
			for _, op := range ref.ops {
				applyClusterOp(&s, op, gw.BackendClientCertificate)
			}
		}
		prev, had := st.specs[n]
		if had && sameSpec(prev, s) && st.msgs[n] != nil {
			continue
		}
		c, err := buildCluster(&s, in, t.opts, *t.packed)
		if err != nil {
			t.cl = nil
			return BuildClusters(gw, inputs(EPPHosts(gw)), t.opts) // the full builder's error
		}
		st.specs[n], st.msgs[n] = s, c
		modify()
		if bulk {
			continue
		}
		i, found := slices.BinarySearch(st.sorted, n)
		if found {
			out[i] = c
		} else {
			st.sorted = slices.Insert(st.sorted, i, n)
			out = slices.Insert(out, i, c)
		}
	}
	if bulk && modified {
		st.sorted = st.sorted[:0]
		for n := range st.msgs {
			st.sorted = append(st.sorted, n)
		}
		sort.Strings(st.sorted)
		out = make([]*clusterv3.Cluster, len(st.sorted))
		for i, n := range st.sorted {
			out[i] = st.msgs[n]
		}
	}
	if !modified && st.out != nil {
		return st.out, nil
	}
	if out == nil {
		out = []*clusterv3.Cluster{}
	}
	st.out = out
	return out, nil
}

// countEPP adds d to the references of the EPP hosts ops call; the
// change reaches eppHosts at applyEPP.
func (st *clusterState) countEPP(ops []clusterOp, d int) {
	for _, op := range ops {
		if op.kind != opEPP {
			continue
		}
		if st.eppDelta == nil {
			st.eppDelta = map[string]int{}
		}
		st.eppDelta[op.eppHost] += d
	}
}

// applyEPP adds the counted changes to eppUses, and to eppHosts the hosts
// now used and not before, or the reverse. A route whose EPP stays (one
// edited, or dropped and added back) leaves eppHosts alone: inserting into
// and deleting from 10,000 sorted names moved them twice per route change.
// Many hosts coming or going (a first translation) sort them all once.
func (st *clusterState) applyEPP() {
	var flipped []string
	for h, d := range st.eppDelta {
		was := st.eppUses[h]
		n := was + d
		if n > 0 {
			st.eppUses[h] = n
		} else {
			delete(st.eppUses, h)
		}
		if (was > 0) != (n > 0) {
			flipped = append(flipped, h)
		}
	}
	clear(st.eppDelta)
	if len(flipped) > 16 {
		st.eppHosts = slices.Sorted(maps.Keys(st.eppUses))
		return
	}
	for _, h := range flipped {
		i, found := slices.BinarySearch(st.eppHosts, h)
		switch _, used := st.eppUses[h]; {
		case used && !found:
			st.eppHosts = slices.Insert(st.eppHosts, i, h)
		case !used && found:
			st.eppHosts = slices.Delete(st.eppHosts, i, i+1)
		}
	}
}

func (st *clusterState) addRefs(nr clRoute, li int, changed map[string]bool) {
	st.countEPP(nr.ops, 1)
	for i, op := range nr.ops {
		if slices.ContainsFunc(nr.ops[:i], func(o clusterOp) bool { return o.name == op.name }) {
			continue // gathered with the first
		}
		nref := clRef{li: li, r: nr.r}
		for _, o := range nr.ops[i:] {
			if o.name == op.name {
				nref.ops = append(nref.ops, o)
			}
		}
		refs := st.refs[op.name]
		j, _ := slices.BinarySearchFunc(refs, nref, refCmp)
		st.refs[op.name] = slices.Insert(refs, j, nref)
		changed[op.name] = true
	}
}

func refCmp(a, b clRef) int {
	if c := cmp.Compare(a.li, b.li); c != 0 {
		return c
	}
	return routeCmp(a.r, b.r)
}

// ref is the index of listener li's reference of route r in refs, or -1.
func ref(refs []clRef, li int, r *model.Route) int {
	i, found := slices.BinarySearchFunc(refs, clRef{li: li, r: r}, refCmp)
	if !found || refs[i].r != r {
		return -1
	}
	return i
}

func (st *clusterState) dropRefs(o *clRoute, li int, changed map[string]bool) {
	st.countEPP(o.ops, -1)
	for _, op := range o.ops {
		changed[op.name] = true
		refs := st.refs[op.name]
		if i := ref(refs, li, o.r); i >= 0 {
			refs = slices.Delete(refs, i, i+1)
		}
		if len(refs) == 0 {
			delete(st.refs, op.name)
		} else {
			st.refs[op.name] = refs
		}
	}
}

func (st *clusterState) setRefRoute(name string, li int, old, r *model.Route) {
	refs := st.refs[name]
	if i := ref(refs, li, old); i >= 0 {
		refs[i].r = r
	}
}

func sameSpec(a, b clusterSpec) bool {
	return a.name == b.name && a.http2 == b.http2 && a.overrideHost == b.overrideHost && a.raiseLimits == b.raiseLimits &&
		a.eppHost == b.eppHost && a.clientCert == b.clientCert && sameTLS(a.tls, b.tls)
}

func sameTLS(a, b *EPPTLS) bool { return a == b || (a != nil && b != nil && reflect.DeepEqual(*a, *b)) }

func sameEPPTLS(a, b map[string]*EPPTLS) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if !sameTLS(a[k], v) {
			return false
		}
	}
	return true
}

// copyTLS is a shallow copy of m.
func copyTLS(m map[string]*EPPTLS) map[string]*EPPTLS {
	out := make(map[string]*EPPTLS, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// EPPHosts are the Endpoint Picker hosts of every pool backend of gw and
// the hosts of its listeners' ExternalProcessors (whose clusters take
// their TLS from the same Inputs.EPPTLS), sorted and unique: a superset
// of those its clusters use.
func EPPHosts(gw *model.Gateway) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range gw.Listeners {
		for _, f := range l.Filters {
			if p := f.Processor; p != nil && !seen[p.Host] {
				seen[p.Host] = true
				out = append(out, p.Host)
			}
		}
		for _, r := range l.Routes {
			for _, rule := range r.Rules {
				for _, b := range rule.Backends {
					if b.Pool != nil && b.Pool.EPP != nil && !seen[b.Pool.EPP.Host] {
						seen[b.Pool.EPP.Host] = true
						out = append(out, b.Pool.EPP.Host)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
