// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
)

// bridge is the host side of the pod network: a Linux bridge in the root
// namespace that holds the pod CIDR's first address (the gateway, which is
// also the Node's InternalIP and every pod's hostIP). Each pod's veth pair
// has its host end enslaved to it, so the host reaches every pod address
// through the bridge's connected route, and pods reach each other and the
// host in one layer-2 segment, as on a node of a bridge-plugin CNI (kind's
// kindnet, the CNI bridge plugin).
type bridge struct {
	name    string
	cidr    netip.Prefix
	gateway netip.Addr
	ip      ipTool
}

// newBridge creates the bridge name with cidr's first address, and brings it
// up. It fails when the link already exists (for example left by a killed
// run: delete it with `ip link del NAME`) or another link already holds a
// route for cidr.
func newBridge(ip ipTool, name string, cidr netip.Prefix) (*bridge, error) {
	if !cidr.Addr().Is4() || cidr.Bits() > 30 || cidr.Bits() < 16 {
		return nil, fmt.Errorf("node: pod CIDR %s: want an IPv4 prefix between /16 and /30", cidr)
	}
	cidr = cidr.Masked()
	b := &bridge{name: name, cidr: cidr, gateway: cidr.Addr().Next(), ip: ip}
	if err := ip.run("link", "add", "name", name, "type", "bridge"); err != nil {
		return nil, fmt.Errorf("%w (a bridge left by a killed run is deleted with `ip link del %s`)", err, name)
	}
	err := ip.runAll([][]string{
		{"addr", "add", fmt.Sprintf("%s/%d", b.gateway, cidr.Bits()), "dev", name},
		{"link", "set", name, "up"},
	})
	if err != nil {
		return nil, errors.Join(err, b.delete())
	}
	return b, nil
}

// delete removes the bridge (with its address and route). The pods' veth
// pairs are deleted with their namespaces, before.
func (b *bridge) delete() error {
	if err := b.ip.run("link", "del", b.name); err != nil && b.ip.linkExists(b.name) {
		return err
	}
	return nil
}

// needRoot returns an error unless the process runs as root, which ip netns,
// veth and bridge links need.
func needRoot() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("node: the pod network needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN for ip netns, veth and bridge links); running as uid %d", uid)
	}
	return nil
}
