// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// netnsRunDir is where `ip netns add` binds named network namespaces.
const netnsRunDir = "/var/run/netns"

// netnsName is what NewNetNS accepts as a namespace name.
var netnsName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$`)

// NetNS is a network namespace made by NewNetNS that holds pod addresses the
// host can reach: a test's servers listen there (Listen, Run) as the pods
// whose addresses the kubelet stand-in writes into the API.
type NetNS struct {
	// Name is the namespace's name, as `ip netns list` shows it.
	Name string
	// HostLink is the host end of the veth pair, in the root namespace; the
	// host routes each address in Addrs through it.
	HostLink string
	// PeerLink is the other end, inside the namespace; it holds Addrs.
	PeerLink string
	// Addrs are the addresses given to NewNetNS.
	Addrs []netip.Addr

	ip string // path of the ip command
}

// NewNetNS creates the network namespace name (`ip netns add`) with a veth
// pair: HostLink in the root namespace, PeerLink inside. It puts each of addrs
// (IPv4, such as "10.244.0.13") on PeerLink as a /32, brings PeerLink, HostLink
// and the namespace's loopback up, routes each address from the host through
// HostLink, and inside the namespace routes everything back through PeerLink
// (a device route: no gateway address).
//
// No other address is made or assigned: HostLink has none, so the host's
// packets to the namespace carry the source address the kernel picks from the
// host's own interfaces, and the namespace reaches it by ARP over the veth pair
// (the default arp_ignore=0 answers). Test traffic must only go to addrs or
// loopback.
//
// Its t.Cleanup, registered as soon as the namespace exists so that it runs
// on failure too, deletes the veth pair (with it HostLink's routes) and the
// namespace. Sockets still open in the namespace keep it alive in the kernel
// but no longer reachable; close them first (a t.Cleanup registered after
// NewNetNS runs before it).
//
// It fails the test (t.Fatal, never t.Skip) without root or without the ip
// command of iproute2, naming what is missing, and when any step fails, for
// example because a namespace or link of the same name is left from a killed
// run, or another namespace already routes one of addrs (addresses must be
// unique among the tests that run at once). Call it from the test goroutine.
func NewNetNS(t testing.TB, name string, addrs ...string) *NetNS {
	t.Helper()
	if !netnsName.MatchString(name) {
		t.Fatalf("kubeenv: NewNetNS: bad namespace name %q (want letters, digits, '_', '.', '-', at most 48)", name)
	}
	if len(addrs) == 0 {
		t.Fatal("kubeenv: NewNetNS: no addresses given")
	}
	n := &NetNS{Name: name}
	for _, a := range addrs {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			t.Fatalf("kubeenv: NewNetNS: %v", err)
		}
		if !addr.Is4() || addr.IsLoopback() || addr.IsUnspecified() || addr.IsMulticast() || addr.IsLinkLocalUnicast() {
			t.Fatalf("kubeenv: NewNetNS: address %s: want an IPv4 unicast address that is not loopback or link-local, such as 10.244.0.13", addr)
		}
		n.Addrs = append(n.Addrs, addr)
	}
	if uid := os.Geteuid(); uid != 0 {
		t.Fatalf("kubeenv: NewNetNS needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN for ip netns and veth links); running as uid %d", uid)
	}
	ip, err := FindIP()
	if err != nil {
		t.Fatal(err)
	}
	n.ip = ip
	h := fnv.New32a()
	_, _ = fmt.Fprintf(h, "%s/%d", name, os.Getpid())
	suffix := fmt.Sprintf("%08x", h.Sum32())
	n.HostLink, n.PeerLink = "kvh-"+suffix, "kvp-"+suffix // at most 15 bytes

	if err := n.run("netns", "add", name); err != nil {
		t.Fatalf("%v (a namespace left by a killed run is deleted with `ip netns del %s`)", err, name)
	}
	t.Cleanup(func() {
		// Deleting either end deletes the pair; the host routes go with HostLink.
		if err := n.run("link", "del", n.HostLink); err != nil && n.linkExists() {
			t.Error(err)
		}
		if err := n.run("netns", "del", name); err != nil {
			t.Error(err)
		}
	})
	steps := [][]string{
		{"link", "add", n.HostLink, "type", "veth", "peer", "name", n.PeerLink, "netns", name},
		{"-n", name, "link", "set", "lo", "up"},
	}
	for _, a := range n.Addrs {
		steps = append(steps, []string{"-n", name, "addr", "add", a.String() + "/32", "dev", n.PeerLink})
	}
	steps = append(steps,
		[]string{"-n", name, "link", "set", n.PeerLink, "up"},
		[]string{"link", "set", n.HostLink, "up"},
		[]string{"-n", name, "route", "add", "default", "dev", n.PeerLink},
	)
	for _, s := range steps {
		if err := n.run(s...); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range n.Addrs {
		if err := n.run("route", "add", a.String()+"/32", "dev", n.HostLink); err != nil {
			t.Fatalf("%v (the host already routes %s elsewhere: pod addresses must be unique among the tests that run at once)", err, a)
		}
	}
	return n
}

// FindIP returns the path of iproute2's ip command, looking in PATH and then
// in the sbin folders, which a non-login PATH may lack.
func FindIP() (string, error) {
	if p, err := exec.LookPath("ip"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("kubeenv: NewNetNS needs the ip command of iproute2, found neither in PATH nor in /usr/sbin or /sbin (Debian: apt-get install -y iproute2)")
}

// run runs the ip command with args and returns an error holding its output.
func (n *NetNS) run(args ...string) error {
	var out bytes.Buffer
	err := RunInOwnGroup(func() *exec.Cmd {
		cmd := exec.Command(n.ip, args...)
		out.Reset()
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd
	})
	if err != nil {
		return fmt.Errorf("kubeenv: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// RunInOwnGroup runs the command newCmd makes in a process group of its own,
// so a Ctrl-C at the terminal, which signals the terminal's foreground
// group, never kills it half-way (for ip: a cleanup's `ip netns del` cut
// short would leave the namespace). A signal sent to this process's group while
// the child is forked but not yet in its own group (the child blocks
// signals until it has called setpgid, then they are delivered) still
// kills it before it runs the command: a child that died of SIGINT never
// ran, and is run again, once, with a new command from newCmd.
func RunInOwnGroup(newCmd func() *exec.Cmd) error {
	for attempt := 0; ; attempt++ {
		cmd := newCmd()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		err := cmd.Run()
		var exit *exec.ExitError
		if attempt == 0 && errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
				continue
			}
		}
		return err
	}
}

func (n *NetNS) linkExists() bool {
	return RunInOwnGroup(func() *exec.Cmd { return exec.Command(n.ip, "link", "show", "dev", n.HostLink) }) == nil
}

// Run calls fn on an OS thread switched into the namespace, and switches the
// thread back afterwards. Sockets that fn creates belong to the namespace for
// their whole life, wherever they are used later; goroutines that fn starts do
// not run in the namespace. It returns fn's error, or an error if the thread
// cannot be switched. Safe to call from any goroutine.
func (n *NetNS) Run(fn func() error) error { return RunInNetNS(n.Name, fn) }

// RunInNetNS is NetNS.Run for the named namespace (one `ip netns add`
// binds under /var/run/netns), for callers that made it themselves (the
// node agent's pod sandboxes): fn runs on an OS thread switched into it, and
// the thread is switched back afterwards; a process fn starts from that
// thread is born in the namespace.
func RunInNetNS(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// A thread that cannot be switched back stays locked, so the runtime
		// ends it with this goroutine rather than reuse it.
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("kubeenv: netns %s: %w", name, err)
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join(netnsRunDir, name))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("kubeenv: netns %s: %w", name, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("kubeenv: enter netns %s: %w", name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("kubeenv: leave netns %s: %w", name, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Listen is net.Listen inside the namespace: the listener, and every
// connection it accepts, belong to the namespace, so a server may Serve it
// from any goroutine. address is usually one of Addrs with a port, such as
// "10.244.0.13:8000". The caller closes the listener.
func (n *NetNS) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := n.Run(func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	return l, err
}
