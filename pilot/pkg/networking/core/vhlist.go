// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// The Translator keeps a route configuration's virtual hosts that have
// routes sorted by hostname (rcState.sortedVH). A route change replaces,
// removes or adds a few of 10,000; inserting and deleting them one by one
// moved the list once per host, with the garbage collector's write
// barrier on every pointer while a cycle runs, which at this heap size is
// most of the time.

// vhHost is the hostname of a virtual host virtualHost built: its one
// domain.
func vhHost(vh *routev3.VirtualHost) string { return vh.GetDomains()[0] }

// searchVH is the index of host h in vhs (sorted by vhHost), or where it
// would be, and whether it is there.
func searchVH(vhs []*routev3.VirtualHost, h string) (int, bool) {
	return slices.BinarySearchFunc(vhs, h, func(vh *routev3.VirtualHost, h string) int { return strings.Compare(vhHost(vh), h) })
}

// spliceVHosts removes from vhs (sorted by host, owned by the caller) the
// virtual hosts of the hostnames gone and inserts add (hosts not in vhs),
// keeping it sorted, with one pass for each that moves only what follows
// the first change.
func spliceVHosts(vhs []*routev3.VirtualHost, gone []string, add []*routev3.VirtualHost) []*routev3.VirtualHost {
	var pos []int
	for _, h := range gone {
		if i, found := searchVH(vhs, h); found {
			pos = append(pos, i)
		}
	}
	if len(pos) > 0 {
		slices.Sort(pos)
		w := pos[0]
		for j, p := range pos {
			end := len(vhs)
			if j+1 < len(pos) {
				end = pos[j+1]
			}
			w += copy(vhs[w:], vhs[p+1:end])
		}
		clear(vhs[w:])
		vhs = vhs[:w]
	}
	if len(add) == 0 {
		return vhs
	}
	slices.SortFunc(add, func(a, b *routev3.VirtualHost) int { return strings.Compare(vhHost(a), vhHost(b)) })
	ins := make([]int, len(add))
	for j, vh := range add {
		ins[j], _ = searchVH(vhs, vhHost(vh))
	}
	n := len(vhs)
	vhs = slices.Grow(vhs, len(add))[:n+len(add)]
	// From the end: the hosts from ins[j] up to the next insertion point
	// move right by the j+1 insertions at or before them.
	hi := n
	for j := len(add) - 1; j >= 0; j-- {
		p := ins[j]
		copy(vhs[p+j+1:hi+j+1], vhs[p:hi])
		vhs[p+j] = add[j]
		hi = p
	}
	return vhs
}
