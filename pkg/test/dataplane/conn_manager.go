// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// listenerHandler is the HTTP connection manager of one listener.
type listenerHandler struct {
	dp   *DataPlane
	name string
	// static is a static listener's configuration (server.go); nil for a
	// listener from LDS, looked up by name in the active configuration.
	static *listenerConfig
}

func (h *listenerHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	dp := h.dp
	ac := dp.active.Load()
	l := h.static
	if l == nil {
		dp.counters.requests.Add(1)
		l = ac.listeners[h.name]
	}
	scheme := "http"
	if r.TLS != nil {
		// The connection manager of the filter chain the connection got
		// at its handshake (tls.go).
		l, scheme = connectionChain(r), "https"
	}
	if l == nil {
		writeResponse(w, extproc.GRPCLocalReply(&extproc.Request{Headers: r.Header}, localReply(http.StatusServiceUnavailable, ""), -1))
		return
	}
	body := &downstreamBody{ReadCloser: r.Body}
	req := &extproc.Request{
		Method: r.Method, Path: r.RequestURI, Authority: r.Host, Scheme: scheme,
		Headers: r.Header.Clone(), Body: body, Trailers: r.Trailer,
	}
	if r.Body == http.NoBody {
		// Filters tell a bodiless request by http.NoBody.
		body.complete.Store(true)
		req.Body = http.NoBody
	}
	// The connection manager's own local replies, in gRPC form for a gRPC
	// request as sendLocalReply makes them.
	hcmReply := func(status int, body string) *extproc.Response {
		return extproc.GRPCLocalReply(req, localReply(status, body), -1)
	}
	if r.Method == http.MethodConnect || !strings.HasPrefix(req.Path, "/") {
		writeResponse(w, hcmReply(http.StatusNotFound, ""))
		return
	}
	if l.normalizePath {
		norm, err := normalizePath(req.Path)
		if err != nil {
			dp.log.Warn("dataplane: path normalization", "path", req.Path, "error", err)
			writeResponse(w, hcmReply(http.StatusBadRequest, ""))
			return
		}
		req.Path = norm
	}
	if l.stripPort {
		req.Authority = stripHostPort(req.Authority)
	}
	// early_header_mutation_extensions, before route selection and every
	// filter (ConnectionManagerImpl::ActiveStream::decodeHeaders runs them
	// ahead of both): header removals.
	for _, name := range l.earlyRemove {
		req.Headers.Del(name)
	}
	h.connectionManagerHeaders(req, r)
	table := l.routes
	if table == nil {
		table = ac.routes[l.rdsName]
	}
	sel, ok := dp.selectRoute(table, req)
	if !ok && isUpgrade(r) {
		writeResponse(w, hcmReply(http.StatusNotFound, ""))
		return
	}
	// Without a route the filters that are not disabled still run, and
	// the router answers 404 (a filter may change the request so that
	// route selection, run again, finds one). An upgrade without a route
	// gets the 404 at once: no listener filter runs on an upgrade in our
	// configuration, whose routes to a listener with filters always match.
	if isUpgrade(r) {
		// An upgrade the connection manager's upgrade_configs allow goes
		// through the filter chain and the router, which keep its
		// Connection and Upgrade headers; any other is refused on a route
		// it matched (createFilterChain() == false) with a 403 (details
		// upgrade_failed) and the connection closed
		// (ConnectionManagerImpl::ActiveStream::decodeHeaders). HTTP/2
		// upgrades (extended CONNECT) are not accepted: our connection
		// managers do not set allow_connect.
		typ := strings.ToLower(r.Header.Get("Upgrade"))
		if !l.upgrades[typ] || r.ProtoMajor != 1 {
			w.Header().Set("Content-Length", "0")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusForbidden)
			return
		}
		req.Upgrade = typ
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	// The connection manager arms the route's max_stream_duration once
	// the route is known, counting from the stream's start, so it covers
	// the filters (ext_proc) as well as the router; a route selected again
	// (a filter cleared the route cache) re-arms it with its own
	// (ConnectionManagerImpl::ActiveStream::refreshDurationTimeout).
	deadline := &streamDeadline{start: start, cancel: cancel}
	defer deadline.stop()
	deadline.arm(sel)
	// A read of the downstream body does not watch ctx: expire the
	// connection's read deadline so that a body still arriving stops
	// holding the request (Envoy stops decoding the stream).
	stop := context.AfterFunc(ctx, func() {
		if context.Cause(ctx) == errMaxStreamDuration {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	})
	defer stop()
	// The HTTP filters (listener filters, CORS, ext_proc) and the router.
	fm := newFilterManager(dp, ac, l, table, sel, deadline.arm)
	resp, err := fm.run(ctx, req)
	if err != nil && resp == nil && context.Cause(ctx) == errMaxStreamDuration {
		// No response started: Envoy's local reply, 504 when the whole
		// request was received, else 408 (Utility::maybeRequestTimeoutCode).
		// After the response started, the body read below fails and the
		// stream is reset, as Envoy does.
		dp.counters.maxDurationReached.Add(1)
		status := http.StatusRequestTimeout
		if body.complete.Load() {
			status = http.StatusGatewayTimeout
		}
		// To a gRPC request with DEADLINE_EXCEEDED, which
		// onStreamMaxDurationReached passes to sendLocalReply
		// (source/common/http/conn_manager_impl.cc), not the code's.
		resp, err = extproc.GRPCLocalReply(req, localReply(status, bodyDurationTimeout), int(codes.DeadlineExceeded)), nil
		fm.hcmReply(resp)
	}
	if err != nil {
		dp.log.Debug("dataplane: request ended", "route", fm.sel.name(), "error", err)
		if resp == nil {
			// The downstream went away or the stream was reset.
			panic(http.ErrAbortHandler)
		}
	}
	writeResponse(w, resp)
}

// connectionManagerHeaders are what Envoy's HCM adds before the filters
// (use_remote_address true): x-forwarded-for gets the peer address
// appended, x-forwarded-proto is set, x-request-id generated if absent.
//
// With proxy_100_continue off (we never set it), Envoy answers "Expect:
// 100-continue" itself and removes the header before the filters, so
// neither the EPP nor the upstream sees it (the 100 is sent by Go's server
// when the body is first read, which ext_proc's body streaming does at
// once).
func (h *listenerHandler) connectionManagerHeaders(req *extproc.Request, r *http.Request) {
	if strings.EqualFold(req.Headers.Get("Expect"), "100-continue") {
		req.Headers.Del("Expect")
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := req.Headers.Get("x-forwarded-for"); prior != "" {
			req.Headers.Set("x-forwarded-for", prior+","+host)
		} else {
			req.Headers.Set("x-forwarded-for", host)
		}
	}
	// https on a TLS connection (Envoy: ConnectionManagerUtility::
	// mutateRequestHeaders, from the connection's ssl()).
	req.Headers.Set("x-forwarded-proto", req.Scheme)
	if req.Headers.Get("x-request-id") == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		req.Headers.Set("x-request-id", hex.EncodeToString(b[:]))
	}
}

// selectRoute picks the virtual host by :authority and the first matching
// route, and for weighted_clusters the cluster (Envoy picks it when it
// resolves the route, so its per-filter config is what filters see).
func (dp *DataPlane) selectRoute(t *routeTable, req *extproc.Request) (routeSel, bool) {
	if t == nil {
		return routeSel{}, false
	}
	vh, r := t.matchRoute(req)
	if r == nil {
		return routeSel{}, false
	}
	sel := routeSel{vh: vh, r: r}
	if r.kind == actionWeighted {
		sel.wc = dp.pickWeighted(r)
	}
	return sel, true
}

// hostPortStart is Envoy's HeaderUtility::getPortStart
// (source/common/http/header_utility.cc): the index of the ':' before a
// Host's port, the last ':' that is not inside an IPv6 literal's brackets;
// -1 without one.
func hostPortStart(host string) int {
	if i := strings.LastIndexByte(host, ':'); i > strings.LastIndexByte(host, ']') {
		return i
	}
	return -1
}

// stripHostPort is Envoy's HeaderUtility::stripPortFromHost with no
// listener port (strip_any_host_port), which the connection manager
// applies to the request's Host before routing
// (ConnectionManagerUtility::maybeNormalizeHost): a numeric port
// (hostPortStart) is removed from the header itself, so the upstream, the
// filters and a redirect's Location see the Host without it.
func stripHostPort(host string) string {
	i := hostPortStart(host)
	if i < 0 {
		return host
	}
	if _, err := strconv.ParseUint(host[i+1:], 10, 32); err != nil {
		return host
	}
	return host[:i]
}

// writeResponse sends resp downstream, flushing as the body arrives
// (streamed LLM responses), then its trailers.
func writeResponse(w http.ResponseWriter, resp *extproc.Response) {
	if t, ok := resp.Body.(*upgradedBody); ok && resp.Status == http.StatusSwitchingProtocols {
		t.tunnel(w, resp.Headers)
		return
	}
	hdr := w.Header()
	for k, vs := range resp.Headers {
		hdr[k] = append([]string(nil), vs...)
	}
	hdr.Del("Transfer-Encoding")
	hdr.Del("Connection")
	w.WriteHeader(resp.Status)
	if resp.Body != nil {
		defer resp.Body.Close()
		rc := http.NewResponseController(w)
		buf := make([]byte, 32*1024)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				_ = rc.Flush()
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				// Envoy resets the downstream stream on an upstream reset
				// after headers.
				slog.Debug("dataplane: response body", "error", err)
				panic(http.ErrAbortHandler)
			}
		}
	}
	for k, vs := range resp.Trailers {
		for _, v := range vs {
			hdr.Add(http.TrailerPrefix+k, v)
		}
	}
}

// downstreamBody is the downstream request body; complete reports whether
// it was read to its end (Envoy's remoteDecodeComplete).
type downstreamBody struct {
	io.ReadCloser
	complete atomic.Bool
}

func (b *downstreamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.complete.Store(true)
	}
	return n, err
}

// isUpgrade is Envoy's Utility::isUpgrade for HTTP/1.1: a Connection header
// with the "upgrade" token and an Upgrade header.
func isUpgrade(r *http.Request) bool {
	if r.Header.Get("Upgrade") == "" {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// streamDeadline is the connection manager's max_stream_duration timer
// of one stream, counted from its start; expiry cancels the stream's
// context with errMaxStreamDuration.
type streamDeadline struct {
	start  time.Time
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	timer  *time.Timer
}

// arm (re)starts the timer for the selected route's max_stream_duration:
// none without a route or without one on it; at once when the stream is
// already older.
func (d *streamDeadline) arm(sel routeSel) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if sel.r == nil || sel.r.maxStreamDuration <= 0 {
		return
	}
	d.timer = time.AfterFunc(max(time.Until(d.start.Add(sel.r.maxStreamDuration)), 0), func() { d.cancel(errMaxStreamDuration) })
}

func (d *streamDeadline) stop() { d.arm(routeSel{}) }
