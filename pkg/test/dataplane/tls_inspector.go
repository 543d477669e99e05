// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// The TLS inspector listener filter on a connection that is not terminated
// by a connection manager (tcp_proxy.go: TLS passthrough, or TLS terminated
// in front of tcp_proxy), as Envoy runs it
// (source/extensions/filters/listener/tls_inspector/tls_inspector.cc,
// Filter::onData, parseClientHello and getParserState; the listener filter
// timeout in source/common/listener_manager/active_tcp_socket.cc):
//
//   - It peeks at the connection's first bytes and parses them as a TLS
//     ClientHello; nothing is consumed, so the filter chain chosen (a
//     passthrough chain's tcp_proxy, or a terminating chain's TLS) reads the
//     ClientHello itself. The stand-in reads the bytes and replays them
//     (replayConn): the same bytes reach the chain in the same order.
//   - A ClientHello that parses gives the requested server name (SNI) the
//     filter chain match uses, "" when it carries none (sni_not_found).
//   - Bytes that are not a TLS ClientHello end the inspection without a
//     server name (tls_not_found), and the connection goes on to filter
//     chain matching: only a chain without server_names can take it.
//   - A ClientHello larger than max_client_hello_size (default and maximum
//     TLS_MAX_CLIENT_HELLO, 64 KiB) closes the connection
//     (client_hello_too_large).
//   - A client that sends nothing within listener_filters_timeout (the
//     Listener's, default 15 s) is closed: continue_on_listener_filters_timeout
//     is false by default (ActiveTcpSocket::onTimeout).
//
// The stand-in parses with Go's crypto/tls server (its GetConfigForClient
// callback sees the parsed ClientHello, and the handshake is then
// abandoned, as Envoy's BoringSSL handshake is abandoned from its servername
// callback). A ClientHello Go's parser refuses and BoringSSL's would accept
// gets no server name here: stricter (only a chain without server_names
// could take it).

const (
	// maxClientHello is tls_inspector's TLS_MAX_CLIENT_HELLO, the default
	// (and largest) max_client_hello_size.
	maxClientHello = 64 * 1024
	// listenerFiltersTimeout is Listener.listener_filters_timeout's
	// default.
	listenerFiltersTimeout = 15 * time.Second
)

// errClientHelloTooLarge is a ClientHello over maxClientHello; the
// connection is closed.
var errClientHelloTooLarge = errors.New("tls_inspector: client hello too large")

// errInspected stops the inspecting handshake once the ClientHello is seen.
var errInspected = errors.New("tls_inspector: client hello inspected")

// clientHello is what the inspector learned: found is false when the first
// bytes were not a TLS ClientHello (tls_not_found).
type clientHello struct {
	found      bool
	serverName string
	alpn       []string
}

// inspectClientHello reads c until a ClientHello is parsed or the bytes
// cannot be one, within timeout. It returns what it found and every byte it
// read, to be replayed to the filter chain (replayConn). An error (timeout,
// a ClientHello over maxClientHello, the connection closed first) means the
// connection is to be closed.
func inspectClientHello(c net.Conn, timeout time.Duration) (clientHello, []byte, error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return clientHello{}, nil, err
	}
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	rec := &recordingConn{Conn: c, limit: maxClientHello}
	var hello clientHello
	srv := tls.Server(rec, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		hello = clientHello{found: true, serverName: h.ServerName, alpn: append([]string(nil), h.SupportedProtos...)}
		return nil, errInspected
	}})
	err := srv.Handshake()
	switch {
	case hello.found:
		return hello, rec.buf.Bytes(), nil
	case rec.tooLarge:
		return clientHello{}, nil, errClientHelloTooLarge
	case rec.readErr != nil:
		// Closed, reset or timed out before a whole ClientHello: Envoy closes
		// it (the timeout) or it is gone.
		return clientHello{}, nil, rec.readErr
	case err != nil:
		// Not a ClientHello: no server name, the connection goes on.
		return clientHello{}, rec.buf.Bytes(), nil
	}
	return clientHello{}, rec.buf.Bytes(), nil
}

// recordingConn records what is read through it, up to limit bytes, and
// refuses writes: the inspecting handshake must never answer the client
// (its alert on abandoning is dropped).
type recordingConn struct {
	net.Conn
	buf      bytes.Buffer
	limit    int
	tooLarge bool
	readErr  error
}

func (r *recordingConn) Read(p []byte) (int, error) {
	if r.buf.Len() >= r.limit {
		r.tooLarge = true
		return 0, errClientHelloTooLarge
	}
	if room := r.limit - r.buf.Len(); len(p) > room {
		p = p[:room]
	}
	n, err := r.Conn.Read(p)
	r.buf.Write(p[:n])
	if err != nil && r.readErr == nil {
		r.readErr = err
	}
	return n, err
}

func (r *recordingConn) Write([]byte) (int, error) { return 0, errInspected }

// replayConn is a connection whose first reads return bytes already read
// from it (by the TLS inspector), then the connection's own.
type replayConn struct {
	net.Conn
	pending []byte
}

func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.pending) > 0 {
		n := copy(p, r.pending)
		r.pending = r.pending[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}

// CloseWrite half-closes the underlying TCP connection (tcp_proxy
// propagates a half-close).
func (r *replayConn) CloseWrite() error {
	if cw, ok := r.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return r.Conn.Close()
}

var _ io.Reader = (*replayConn)(nil)
