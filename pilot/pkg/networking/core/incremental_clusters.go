// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"cmp"
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
	out    []*clusterv3.Cluster
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
	// The namespace decides which credentialName CAs the clusters get
	// (model.UpstreamTLS.CAFor).
	b := strconv.AppendQuote(nil, gw.Namespace)
	b = strconv.AppendQuote(b, gw.BackendClientCertificate)
	for _, l := range gw.Listeners {
		b = strconv.AppendQuote(b, l.Hostname)
	}
	return string(b)
}

func (t *Translator) buildClusters(gw *model.Gateway, in Inputs) ([]*clusterv3.Cluster, error) {
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
		return BuildClusters(gw, in, t.opts)
	}
	sig := clusterSig(gw)
	st := t.cl
	if st == nil || st.sig != sig || len(st.lists) != len(gw.Listeners) {
		st = &clusterState{sig: sig, lists: make([]routeList[clRoute], len(gw.Listeners)), refs: map[string][]clRef{},
			specs: map[string]clusterSpec{}, msgs: map[string]*clusterv3.Cluster{}}
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
				nr := clRoute{r: r, ops: routeClusterOps(l.Hostname, r, gw.Namespace, t.opts)}
				st.addRefs(nr, li, changed)
				return nr
			},
			func(o clRoute) { st.dropRefs(&o, li, changed) })
		if !ok {
			t.cl = nil
			return BuildClusters(gw, in, t.opts)
		}
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
		opts := t.opts
		opts.gatewayNamespace = gw.Namespace
		c, err := buildCluster(&s, in, opts, *t.packed)
		if err != nil {
			t.cl = nil
			return BuildClusters(gw, in, t.opts) // the full builder's error
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

func (st *clusterState) addRefs(nr clRoute, li int, changed map[string]bool) {
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
	return a.name == b.name && a.http2 == b.http2 && a.negotiate == b.negotiate && a.overrideHost == b.overrideHost && a.raiseLimits == b.raiseLimits &&
		a.epp == b.epp && a.clientCert == b.clientCert && sameTLS(a.tls, b.tls)
}

func sameTLS(a, b *UpstreamTLS) bool {
	return a == b || (a != nil && b != nil && reflect.DeepEqual(*a, *b))
}
