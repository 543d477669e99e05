// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Relay listens on addr inside the namespace (a pod's address and port, such
// as the EPP pod's 10.244.0.16:9002) and copies every connection, byte for
// byte (TLS included), to target in the root namespace, usually a server
// that listens only on the host's loopback (the API server, the recording
// proxy, an EPP). The dialling goroutines run outside the namespace, so they
// reach the host's 127.0.0.1. It stops, closing every connection, when t's
// cleanups run; registered after NewNetNS, that is before the namespace is
// deleted. It fails t when addr cannot be bound.
func (n *NetNS) Relay(t testing.TB, addr, target string) {
	t.Helper()
	ln, err := n.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("kubeenv: relay %s -> %s in netns %s: %v", addr, target, n.Name, err)
	}
	var (
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
		wg     sync.WaitGroup
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			_ = c.Close()
			return false
		}
		conns[c] = true
		return true
	}
	wg.Go(func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			if !track(down) {
				return
			}
			wg.Go(func() {
				up, err := net.Dial("tcp", target)
				if err != nil {
					_ = down.Close()
					return
				}
				if !track(up) {
					_ = down.Close()
					return
				}
				pipe(down, up)
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// pipe copies a and b into each other until either side ends, then closes
// both.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err == nil || errors.Is(err, net.ErrClosed) {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
				return
			}
		}
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Go(func() { cp(a, b) })
	wg.Go(func() { cp(b, a) })
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}
