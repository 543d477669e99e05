// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"slices"

	"github.com/cespare/xxhash/v2"
)

// What a publish costs for the shared kinds (EDS, SDS). A Gateway of
// 10,000 pools has 20,000 EDS names; an endpoint change touches one. So
// the Cache keeps, per Gateway and shared kind, a set version maintained
// from what changed (sharedSet) and, per publish, the names whose desired
// state changed for the Gateway (setChange). A watch that held everything
// desired before the publish (watch.synced) is answered from those names
// alone (Cache.changedPlan), and its response's version is the Gateway's
// set version; nothing walks the Gateway's names.

// sharedSet is one Gateway's set of one shared kind: the names its
// snapshot lists that have an entry, each with its version under the
// Gateway's warm keys.
type sharedSet struct {
	// sum is the sum (mod 2^64) of memberHash over the set; count its size.
	// A sum does not depend on order, so it is updated per changed name.
	sum   uint64
	count int
	// seq is the Cache's publish number of the last publish that changed
	// what a watch of this Gateway and kind may get; a stream known to hold
	// the set as of seq holds it now if seq did not move (streams.go).
	seq uint64
}

// version is the set's version: the DiscoveryResponse.version_info (SotW)
// and system_version_info (delta) of every response of the kind to the
// Gateway's proxies. Equal sets have equal versions, also across restarts
// (the hash has no seed and the sum no order).
func (s *sharedSet) version() string {
	if s == nil || s.count == 0 {
		return "empty"
	}
	return hashHex(s.sum)
}

// memberHash is one member's share of a set version: the xxhash of its
// name and version under key (as setVersion writes a member).
func memberHash(name, version, key string, hasKey bool) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(name)
	_, _ = d.Write([]byte{0})
	_, _ = d.WriteString(version)
	if hasKey {
		_, _ = d.Write([]byte{'/'})
		_, _ = d.WriteString(key)
	}
	_, _ = d.Write([]byte{0})
	return d.Sum64()
}

// setView is one side of a publish for one Gateway and shared kind: its
// names (sorted, unique), warm keys and entries.
type setView struct {
	names   []string
	warm    warmKeys
	entries func(name string) *entry
}

// member is name's share of the set in v: its hash, or false when the
// Gateway does not list it or it has no entry.
func (v setView) member(name string) (uint64, bool) {
	if _, ok := slices.BinarySearch(v.names, name); !ok {
		return 0, false
	}
	e := v.entries(name)
	if e == nil {
		return 0, false
	}
	k, hasKey := v.warm[name]
	return memberHash(name, e.version, k, hasKey), true
}

// fullSet computes the set of v from scratch.
func fullSet(v setView) sharedSet {
	var s sharedSet
	for _, n := range v.names {
		if h, ok := v.member(n); ok {
			s.sum += h
			s.count++
		}
	}
	return s
}

// setChange is what one publish changed for one Gateway and shared kind.
type setChange struct {
	// full: the Gateway is new; every watch is answered from its whole set.
	full bool
	// names are the names, sorted, whose membership, entry or warm key
	// may have changed; every other name's desired state is unchanged.
	names []string
	// prevSeq is the set's seq before the publish: a watch in sync as of
	// prevSeq can be answered from names.
	prevSeq uint64
}

// changedNames adds to into the names in exactly one of the sorted lists
// a and b.
func changedNames(into map[string]struct{}, a, b []string) {
	if sameList(a, b) {
		return
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			into[a[i]] = struct{}{}
			i++
		case i == len(a) || b[j] < a[i]:
			into[b[j]] = struct{}{}
			j++
		default:
			i++
			j++
		}
	}
}

// changedKeys adds to into the names whose warm key differs between a and
// b (present in one only, or different).
func changedKeys(into map[string]struct{}, a, b warmKeys) {
	if sameWarm(a, b) {
		return
	}
	for n, k := range a {
		if k2, ok := b[n]; !ok || k2 != k {
			into[n] = struct{}{}
		}
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			into[n] = struct{}{}
		}
	}
}

// apply moves s from old to cur over names, the only names whose share may
// differ between the two views.
func (s *sharedSet) apply(old, cur setView, names []string) {
	for _, n := range names {
		if h, ok := old.member(n); ok {
			s.sum -= h
			s.count--
		}
		if h, ok := cur.member(n); ok {
			s.sum += h
			s.count++
		}
	}
}
