// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"io"
	"net"
	"sync"
)

// apiForwarder makes the API server reachable from the pods: it listens on
// the bridge's address and copies each connection to the API server's own
// address (kubeenv binds it to 127.0.0.1, which a pod's namespace cannot
// reach). It plays kube-proxy's part for the "kubernetes" Service, at one
// address the pods can route to; TLS passes through untouched.
type apiForwarder struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

func newAPIForwarder(listen, target string) (*apiForwarder, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	f := &apiForwarder{l: l, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *apiForwarder) addr() string { return f.l.Addr().String() }

func (f *apiForwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() { defer f.wg.Done(); f.pipe(c) }()
	}
}

func (f *apiForwarder) pipe(down net.Conn) {
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		down.Close()
		return
	}
	if !f.track(down, up) {
		return
	}
	defer f.untrack(down, up)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, down)
	go cp(down, up)
	<-done
	<-done
}

// track registers both ends; false (both closed) once the forwarder closed.
func (f *apiForwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *apiForwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(f.conns, c)
	}
}

// close stops listening, closes every connection and waits for the copies.
func (f *apiForwarder) close() error {
	err := f.l.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
