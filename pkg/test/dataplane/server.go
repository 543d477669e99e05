// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"net"
	"net/http"
	"time"
)

// staticServer is what Envoy's server runs from the bootstrap itself
// (source/server/server.cc): the admin listener, which listens from the
// start (AdminImpl::startHttpListener, called in InstanceImpl::initialize),
// and the static listeners, bound at start and listening once the server
// is initialized (startWorkers; listen_socket.go). Guarded by
// DataPlane.mu.
type staticServer struct {
	admin *boundListener
	// sockets are the static listeners' bound sockets, by listener, until
	// the workers start.
	sockets map[*listenerConfig]*listenSocket
	// listeners are the static listeners serving, once started.
	listeners []*boundListener
}

// startServer binds the admin and the static listeners' sockets; any bind
// error fails the start, as it makes Envoy exit.
func (dp *DataPlane) startServer() error {
	st := dp.target.static
	srv := &staticServer{sockets: map[*listenerConfig]*listenSocket{}}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	dp.server = srv // shutdown closes whatever was opened
	if st.admin != "" {
		ln, err := net.Listen("tcp", st.admin)
		if err != nil {
			return errors.Join(errors.New("dataplane: admin"), err)
		}
		srv.admin = serveHTTP("admin", 0, ln, adminHandler{dp})
		dp.log.Info("dataplane: admin address", "address", ln.Addr().String())
	}
	for _, l := range st.listeners {
		s, err := bindSocket(l.address, l.port)
		if err != nil {
			return errors.Join(errors.New("dataplane: static listener "+l.name), err)
		}
		srv.sockets[l] = s
	}
	if dp.initState == StateLive {
		dp.startWorkersLocked()
	}
	return nil
}

// startWorkersLocked makes the static listeners accept connections
// (Envoy's ListenerManagerImpl::startWorkers: listen(), then the workers
// serve). A listen error is logged and leaves that listener closed, as
// Envoy logs a failed doFinalPreWorkerInit and drops the listener.
// dp.mu is held.
func (dp *DataPlane) startWorkersLocked() {
	srv := dp.server
	if srv == nil || dp.closed {
		return
	}
	for _, l := range dp.target.static.listeners {
		s := srv.sockets[l]
		if s == nil {
			continue
		}
		delete(srv.sockets, l)
		ln, err := s.listen()
		if err != nil {
			dp.log.Error("dataplane: static listener", "listener", l.name, "error", err)
			continue
		}
		srv.listeners = append(srv.listeners, serveHTTP(l.name, l.port, ln, &listenerHandler{dp: dp, name: l.name, static: l}))
	}
}

// serveHTTP serves h on ln: HTTP/1.1 and h2c with prior knowledge (the
// HCM's codec_type AUTO; Envoy's admin takes both too).
func serveHTTP(name string, port uint32, ln net.Listener, h http.Handler) *boundListener {
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	b := &boundListener{name: name, port: port, ln: ln, done: make(chan struct{})}
	b.srv = &http.Server{Handler: h, Protocols: &protos, ReadHeaderTimeout: time.Minute}
	go func() {
		defer close(b.done)
		_ = b.srv.Serve(ln)
	}()
	return b
}

// close stops everything s opened; s may be nil.
func (s *staticServer) close() {
	if s == nil {
		return
	}
	if s.admin != nil {
		s.admin.close()
	}
	for _, sock := range s.sockets {
		sock.close()
	}
	for _, b := range s.listeners {
		b.close()
	}
}
