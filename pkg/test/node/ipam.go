// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"fmt"
	"net/netip"
	"sync"
)

// ipam hands out pod addresses from the pod CIDR, as host-local IPAM does:
// the network and gateway (first) addresses and the broadcast (last) address
// are never given, and a released address is reused only after every other
// free address has been given once (round robin), so a new pod does not take
// the address a deleted pod had a moment ago.
type ipam struct {
	mu    sync.Mutex
	cidr  netip.Prefix
	last  netip.Addr
	inUse map[netip.Addr]bool
}

func newIPAM(cidr netip.Prefix) *ipam {
	gw := cidr.Masked().Addr().Next()
	return &ipam{cidr: cidr.Masked(), last: gw, inUse: map[netip.Addr]bool{}}
}

// allocate returns a free address, or an error when the CIDR is full.
func (a *ipam) allocate() (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for cand, tried := a.next(a.last), 0; tried < 1<<(32-a.cidr.Bits()); cand, tried = a.next(cand), tried+1 {
		if !a.inUse[cand] {
			a.inUse[cand], a.last = true, cand
			return cand, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("node: pod CIDR %s has no free address", a.cidr)
}

// next returns the address after cur, wrapping past the broadcast address to
// the first one after the gateway.
func (a *ipam) next(cur netip.Addr) netip.Addr {
	n := cur.Next()
	if !a.cidr.Contains(n) || !a.cidr.Contains(n.Next()) { // n is broadcast or beyond
		return a.cidr.Addr().Next().Next()
	}
	return n
}

// release returns addr to the pool.
func (a *ipam) release(addr netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.inUse, addr)
}
