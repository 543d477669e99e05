// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// sandbox is one pod's network namespace, the part of a CRI pod sandbox this
// node keeps: a named netns with loopback up and eth0, one end of a veth pair
// whose host end is enslaved to the bridge; eth0 holds the pod address in the
// bridge's prefix, with a default route through the bridge's gateway address.
// Every container of the pod runs in it, so they share the address and
// loopback, as containers of a pod share the sandbox's namespace.
type sandbox struct {
	netns    string
	hostLink string
	addr     netip.Addr
	ip       ipTool
}

// newSandbox creates the namespace for the pod with uid and wires addr into
// it. On error it removes what it made.
func newSandbox(ip ipTool, br *bridge, uid string, addr netip.Addr) (*sandbox, error) {
	h := fnv.New32a()
	_, _ = fmt.Fprintf(h, "%s/%d", uid, os.Getpid())
	suffix := fmt.Sprintf("%08x", h.Sum32())
	s := &sandbox{netns: "imnode-" + suffix, hostLink: "imv-" + suffix, addr: addr, ip: ip}
	if err := ip.run("netns", "add", s.netns); err != nil {
		return nil, err
	}
	err := ip.runAll([][]string{
		{"link", "add", s.hostLink, "type", "veth", "peer", "name", "eth0", "netns", s.netns},
		{"link", "set", s.hostLink, "master", br.name, "up"},
		{"-n", s.netns, "link", "set", "lo", "up"},
		{"-n", s.netns, "addr", "add", fmt.Sprintf("%s/%d", addr, br.cidr.Bits()), "dev", "eth0"},
		{"-n", s.netns, "link", "set", "eth0", "up"},
		{"-n", s.netns, "route", "add", "default", "via", br.gateway.String(), "dev", "eth0"},
	})
	if err != nil {
		return nil, errors.Join(err, s.delete())
	}
	return s, nil
}

// delete removes the veth pair and the namespace. Processes still inside keep
// the namespace alive in the kernel, unreachable; stop them first.
func (s *sandbox) delete() error {
	var errs []error
	if err := s.ip.run("link", "del", s.hostLink); err != nil && s.ip.linkExists(s.hostLink) {
		errs = append(errs, err)
	}
	if err := s.ip.run("netns", "del", s.netns); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// run calls fn on an OS thread switched into the namespace, and switches the
// thread back afterwards. A process that fn starts (fork and exec from this
// thread) is born in the namespace; sockets fn opens belong to it. A thread
// that cannot be switched back stays locked, so the runtime ends it.
func (s *sandbox) run(fn func() error) error { return kubeenv.RunInNetNS(s.netns, fn) }
