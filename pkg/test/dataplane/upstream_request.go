// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// attempt sends one upstream request to host. failure is "" on a
// response, "connect" when no connection could be made, else "reset".
func (dp *DataPlane) attempt(ctx context.Context, c *activeCluster, host string, req *extproc.Request, body io.Reader) (*http.Response, string) {
	scheme := "http"
	if c.rt.cfg.tls != nil {
		scheme = "https"
	}
	if body == nil {
		body = http.NoBody
	}
	up, err := http.NewRequestWithContext(ctx, req.Method, scheme+"://"+host+req.Path, body)
	if err != nil {
		return nil, "reset"
	}
	up.Host = req.Authority
	up.Header = req.Headers.Clone()
	removeHopByHop(up.Header)
	if req.Upgrade != "" {
		// An upgrade the connection manager accepted keeps its Connection
		// and Upgrade headers (ConnectionManagerUtility::mutateRequestHeaders
		// removes them only from other requests).
		up.Header.Set("Connection", "Upgrade")
		up.Header.Set("Upgrade", req.Headers.Get("Upgrade"))
	}
	if req.Trailers != nil {
		up.Trailer = req.Trailers
	}
	if cl := up.Header.Get("content-length"); cl != "" && body != http.NoBody {
		// Let the transport frame the body as it was given.
		up.Header.Del("content-length")
		if n, err := parseLen(cl); err == nil {
			up.ContentLength = n
		}
	}
	resp, err := c.rt.transport.RoundTrip(up)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, "connect"
		}
		return nil, "reset"
	}
	return resp, ""
}

func parseLen(s string) (int64, error) {
	var n int64
	_, err := fmt.Sscan(s, &n)
	return n, err
}

// releaseBody frees the circuit breaker slot and the route timeout when
// the response body is closed, and copies the upstream's trailers into
// trailers when the body ends.
type releaseBody struct {
	io.ReadCloser
	release  func()
	once     atomic.Bool
	up       *http.Response
	trailers http.Header
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && b.up != nil {
		for k, vs := range b.up.Trailer {
			if len(vs) > 0 { // a declared trailer that never came has no value
				b.trailers[k] = vs
			}
		}
		b.up = nil
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	if b.once.CompareAndSwap(false, true) {
		b.release()
	}
	return err
}

var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te"}

func removeHopByHop(h http.Header) {
	for _, k := range hopByHop {
		h.Del(k)
	}
}

// upgradedBody is the upstream connection of an accepted upgrade, as the
// body of its 101 response; tunnel copies bytes both ways.
type upgradedBody struct {
	dp      *DataPlane
	rwc     io.ReadWriteCloser
	release func()
	once    sync.Once
}

func (b *upgradedBody) Read(p []byte) (int, error) { return b.rwc.Read(p) }

func (b *upgradedBody) Close() error {
	err := b.rwc.Close()
	b.once.Do(b.release)
	return err
}

// tunnel sends the 101 response with headers h on w's connection, taken
// over from the HTTP server, then copies bytes both ways until either side
// closes, and closes the other (Envoy's upgraded stream: the codec passes
// data frames through; a close on one side ends the stream).
func (b *upgradedBody) tunnel(w http.ResponseWriter, h http.Header) {
	defer b.Close()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		slog.Debug("dataplane: upgrade: take over the downstream connection", "error", err)
		return
	}
	defer conn.Close()
	untrack, ok := b.dp.trackTunnel(conn, b.rwc)
	defer untrack()
	if !ok {
		return
	}
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	_ = h.Write(brw)
	_, _ = brw.WriteString("\r\n")
	if err := brw.Flush(); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(b.rwc, brw) // downstream to upstream, buffered bytes first
		_ = b.rwc.Close()
	}()
	_, _ = io.Copy(conn, b.rwc)
	_ = conn.Close()
	<-done
}
