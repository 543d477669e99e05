// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

// startSim serves one simulated vLLM pod at ip on every target port,
// inside the test's network namespace. One vllmsim.Server per pod: its
// x-inference-port says which port a request came in on.
func (h *harness) startSim(ip string) *vllmsim.Server {
	h.t.Helper()
	cfg := vllmsim.Config{PodName: podName(ip), Model: baseModel, LoRAs: []string{loraModel}, MaxLoRAs: 2}
	if h.opts.Sim != nil {
		h.opts.Sim(&cfg)
	}
	sim := vllmsim.New(cfg)
	var servers []*http.Server
	var wg sync.WaitGroup
	for _, p := range h.opts.TargetPorts {
		ln, err := h.netns.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(p))))
		if err != nil {
			h.t.Fatalf("simulator %s: %v", podName(ip), err)
		}
		srv := &http.Server{Handler: sim}
		servers = append(servers, srv)
		wg.Go(func() { _ = srv.Serve(ln) })
	}
	// Registered after NewNetNS, so it runs before the namespace goes.
	h.t.Cleanup(func() {
		_ = sim.Close() // fails held requests, so Shutdown does not wait on them
		for _, s := range servers {
			_ = s.Shutdown(context.Background())
		}
		wg.Wait()
	})
	h.sims[ip] = sim
	return sim
}

// relay listens on addr inside ns (the EPP pod's address) and copies every
// connection, byte for byte (TLS included), to target on the host's
// loopback (the recording proxy, which eppproxy only serves on loopback).
// The dialling goroutines run outside the namespace, so they reach the
// host's 127.0.0.1. It stops, closing every connection, when the test ends.
func relay(t *testing.T, ns *kubeenv.NetNS, addr, target string) {
	t.Helper()
	ln, err := ns.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("relay %s -> %s: %v", addr, target, err)
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
