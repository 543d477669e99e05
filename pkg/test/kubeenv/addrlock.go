// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// AddrLockDir is the folder of LockAddresses' lock files, one per address.
var AddrLockDir = filepath.Join(os.TempDir(), "infermesh-netns-addrs")

// LockAddresses takes, for each of addrs, an exclusive lock (flock) that
// every process on the machine calling it for that address shares, waiting
// while another process holds it, and releases them in a t.Cleanup. Call it
// before NewNetNS with the addresses the namespace will route: its cleanup is
// then registered first and runs last, after the namespace and its host
// routes are gone, so two programs that route the same pod addresses (the
// GIE suite and the traffic demo both use the seed's 10.244.0.13-16, and
// `make integ` runs two packages at a time) take turns instead of failing on
// the host route the other one holds.
//
// Locks are taken in address order, so two callers that each pass all their
// addresses in one call never deadlock. The kernel drops a lock when its
// holder exits, even when killed. A wait is logged once.
func LockAddresses(t testing.TB, addrs ...string) {
	t.Helper()
	var sorted []netip.Addr
	for _, a := range addrs {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			t.Fatalf("kubeenv: LockAddresses: %v", err)
		}
		sorted = append(sorted, addr)
	}
	slices.SortFunc(sorted, func(a, b netip.Addr) int { return a.Compare(b) })
	sorted = slices.Compact(sorted)
	if err := os.MkdirAll(AddrLockDir, 0o755); err != nil {
		t.Fatalf("kubeenv: LockAddresses: %v", err)
	}
	for _, a := range sorted {
		path := filepath.Join(AddrLockDir, a.String()+".lock")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatalf("kubeenv: LockAddresses: %v", err)
		}
		t.Cleanup(func() { _ = f.Close() }) // closing the file releases the lock
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			continue
		}
		t.Logf("kubeenv: waiting for address %s, which another process's network namespace holds (lock %s)", a, path)
		if err := flockWait(f); err != nil {
			t.Fatalf("kubeenv: LockAddresses: lock %s: %v", path, err)
		}
	}
}

// flockWait blocks until f's exclusive lock is taken, retrying on EINTR.
func flockWait(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("flock: %w", err)
			}
			return nil
		}
	}
}
