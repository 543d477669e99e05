// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// listenSocket is a static listener's socket, bound at start and listening
// only once the server is initialized, as Envoy does it: the listener
// manager creates and binds the socket when the listener is added
// (ListenSocketFactoryImpl, source/common/listener_manager/
// listener_impl.cc; a bind error fails the start), and calls listen() in
// doFinalPreWorkerInit, just before the workers start, which happens
// after the init manager is done (InstanceImpl::startWorkers,
// source/server/server.cc). Until then a connection is refused.
type listenSocket struct {
	fd   int
	addr string
}

// bindSocket creates a TCP socket with SO_REUSEADDR (as Go's and Envoy's
// listeners) and binds it to host:port, an IP literal.
func bindSocket(host string, port uint32) (*listenSocket, error) {
	addr := net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("bind %s: not an IP address", addr)
	}
	var sa syscall.Sockaddr
	family := syscall.AF_INET
	if ip4 := ip.To4(); ip4 != nil {
		s := &syscall.SockaddrInet4{Port: int(port)}
		copy(s.Addr[:], ip4)
		sa = s
	} else {
		family = syscall.AF_INET6
		s := &syscall.SockaddrInet6{Port: int(port)}
		copy(s.Addr[:], ip.To16())
		sa = s
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, fmt.Errorf("bind %s: socket: %w", addr, err)
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("bind %s: SO_REUSEADDR: %w", addr, err)
	}
	if err := syscall.Bind(fd, sa); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("cannot bind '%s': %w", addr, err)
	}
	return &listenSocket{fd: fd, addr: addr}, nil
}

// listen starts listening, with the backlog Envoy uses on Linux
// (ENVOY_TCP_BACKLOG_SIZE -1: the kernel caps it at net.core.somaxconn),
// and hands the socket to Go as a net.Listener. The socket is consumed.
func (s *listenSocket) listen() (net.Listener, error) {
	if err := syscall.Listen(s.fd, -1); err != nil {
		s.close()
		return nil, fmt.Errorf("listen %s: %w", s.addr, err)
	}
	f := os.NewFile(uintptr(s.fd), "listener "+s.addr)
	s.fd = -1
	defer f.Close() // FileListener holds its own duplicate
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", s.addr, err)
	}
	return ln, nil
}

// close releases a socket that never listened.
func (s *listenSocket) close() {
	if s.fd >= 0 {
		_ = syscall.Close(s.fd)
		s.fd = -1
	}
}
