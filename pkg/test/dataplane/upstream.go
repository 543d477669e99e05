// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// Local reply bodies, as Envoy writes them.
const (
	bodyNoHealthyUpstream = "no healthy upstream"
	bodyUpstreamTimeout   = "upstream request timeout"
	bodyConnectFailure    = "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure"
	bodyReset             = "upstream connect error or disconnect/reset before headers. reset reason: connection termination"
	bodyOverflow          = "upstream connect error or disconnect/reset before headers. reset reason: overflow"
	bodyDurationTimeout   = "downstream duration timeout"
)

// retryShadowBufferLimit is how much of a request body the router buffers
// for retries: the stream's decoder buffer limit, which is the
// listener's per_connection_buffer_limit_bytes, 1 MiB when unset
// (ListenerImpl in source/common/listener_manager/listener_impl.cc); our
// listeners do not set it, nor routes per_request_buffer_limit_bytes
// (neither is in allowed.go).
const retryShadowBufferLimit = 1 << 20

// Causes of a request context's end, told apart with context.Cause.
var (
	// errRouteTimeout: RouteAction.timeout, counted by the router.
	errRouteTimeout = errors.New("route timeout")
	// errPerTryTimeout: RetryPolicy.per_try_timeout, one attempt's.
	errPerTryTimeout = errors.New("per-try timeout")
	// errMaxStreamDuration: RouteAction.max_stream_duration, counted by the
	// connection manager from the stream's start.
	errMaxStreamDuration = errors.New("max stream duration")
)

// clusterRuntime is the connection pool, load balancer state and circuit
// breaker counts of one cluster version.
type clusterRuntime struct {
	pb        *clusterv3.Cluster
	cfg       *clusterConfig
	transport *http.Transport
	rr        atomic.Uint64
	active    atomic.Int64
}

func newClusterRuntime(pb *clusterv3.Cluster, cfg *clusterConfig, dial func(context.Context, string, string) (net.Conn, error)) *clusterRuntime {
	var protos http.Protocols
	switch {
	case cfg.http2 && cfg.tls != nil:
		protos.SetHTTP2(true)
	case cfg.http2:
		protos.SetUnencryptedHTTP2(true) // h2c with prior knowledge, as Envoy
	case cfg.negotiate:
		// auto_config (compileAutoConfig; always over TLS): ALPN offers
		// h2,http/1.1 and the connection speaks HTTP/2 exactly when the
		// server picked h2, as Envoy's mixed connection pool.
		protos.SetHTTP1(true)
		protos.SetHTTP2(true)
	default:
		protos.SetHTTP1(true) // Envoy's default upstream codec, whatever ALPN offers
	}
	d := &net.Dialer{Timeout: cfg.connectTimeout}
	if cfg.tcpKeepalive != nil {
		d.KeepAliveConfig = *cfg.tcpKeepalive
	}
	t := &http.Transport{
		Protocols:          &protos,
		TLSClientConfig:    cfg.tls,
		DisableCompression: true,
		MaxConnsPerHost:    int(cfg.maxConnections),
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dial == nil {
				return d.DialContext(ctx, network, addr)
			}
			ctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
			defer cancel()
			return dial(ctx, network, addr)
		},
	}
	return &clusterRuntime{pb: pb, cfg: cfg, transport: t}
}

func (c *clusterRuntime) close() { c.transport.CloseIdleConnections() }

// roundRobin picks the next of addrs.
func (c *clusterRuntime) roundRobin(addrs []string) string {
	return addrs[(c.rr.Add(1)-1)%uint64(len(addrs))]
}

// hostPicker is the load balancer for one request: override_host walks the
// metadata's host list across attempts, skipping hosts not in the cluster,
// then falls back to round robin.
type hostPicker struct {
	dp       *DataPlane
	c        *activeCluster
	override []string
	next     int
}

func newHostPicker(dp *DataPlane, c *activeCluster, md map[string]*structpb.Struct) *hostPicker {
	p := &hostPicker{dp: dp, c: c}
	oh := c.rt.cfg.overrideHost
	if oh == nil {
		return p
	}
	for _, src := range oh.sources {
		v := lookupMetadata(md, src)
		if v == "" {
			continue
		}
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				p.override = append(p.override, h)
			}
		}
		break // the first source that has hosts
	}
	return p
}

// pick returns the host for the next attempt.
func (p *hostPicker) pick() (string, bool) {
	if len(p.c.addrs) == 0 {
		return "", false
	}
	for p.next < len(p.override) {
		h := p.override[p.next]
		p.next++
		for _, a := range p.c.addrs {
			if a == h {
				return h, true
			}
		}
	}
	if p.c.rt.cfg.overrideHost != nil {
		p.dp.counters.fallbacks.Add(1)
	}
	return p.c.rt.roundRobin(p.c.addrs), true
}

func lookupMetadata(md map[string]*structpb.Struct, k metadataPath) string {
	s := md[k.namespace]
	if s == nil {
		return ""
	}
	var v *structpb.Value = structpb.NewStructValue(s)
	for _, seg := range k.path {
		v = v.GetStructValue().GetFields()[seg]
	}
	return v.GetStringValue()
}

// routeSel is a selected route, its virtual host and, for
// weighted_clusters, the picked cluster. The zero value is "no route".
type routeSel struct {
	vh *virtualHost
	r  *route
	wc *weightedCluster
}

// name is the route's name for logs, "" without a route.
func (s routeSel) name() string {
	if s.r == nil {
		return ""
	}
	return s.r.name
}

// perFilter is the per-filter configuration a filter sees for the
// selection, the levels folded from the least specific as Envoy's
// Utility::getAllPerFilterConfig lists them (virtual host, route,
// weighted cluster): ext_proc field by field (extproc.MergePerRoute,
// Filter::mergePerRouteConfig), the CORS policy replaced by the more
// specific one. No route, no configuration.
func (s routeSel) perFilter() (pf perFilterConfig) {
	if s.r == nil {
		return pf
	}
	levels := []perFilterConfig{s.vh.perFilter, s.r.perFilter}
	if s.wc != nil {
		levels = append(levels, s.wc.perFilter)
	}
	for _, l := range levels {
		for name, c := range l.extProc {
			if pf.extProc == nil {
				pf.extProc = map[string]*extprocv3.ExtProcPerRoute{}
			}
			pf.extProc[name] = extproc.MergePerRoute(pf.extProc[name], c)
		}
		// ext_authz takes the most specific ExtAuthzPerRoute
		// (ext_authz.cc, resolveMostSpecificPerFilterConfig).
		for name, c := range l.extAuthz {
			if pf.extAuthz == nil {
				pf.extAuthz = map[string]*extauthzv3.ExtAuthzPerRoute{}
			}
			pf.extAuthz[name] = c
		}
		if l.cors != nil {
			pf.cors = l.cors
		}
	}
	return pf
}

// router is the router filter for one request: redirects, direct
// responses, and forwarding with header mutations, rewrites, timeout,
// retries, circuit breaking and load balancing. It returns the response
// (possibly a local reply) and the metadata the load balancer set.
func (dp *DataPlane) router(ctx context.Context, ac *activeConfig, sel routeSel, req *extproc.Request, md map[string]*structpb.Struct) (*extproc.Response, map[string]*structpb.Struct, error) {
	r := sel.r
	if r == nil {
		// No route matched (Router::Filter::decodeHeaders: no route, the
		// NR local reply 404).
		return localReply(http.StatusNotFound, ""), nil, nil
	}
	switch r.kind {
	case actionRedirect, actionDirect:
		return directReply(r, req), nil, nil
	}
	name := r.cluster
	if sel.wc != nil {
		name = sel.wc.name
	}
	c := ac.clusters[name]
	if c == nil {
		return localReply(r.clusterNotFound, ""), nil, nil
	}
	sel.finalizeRequest(req)
	// Retries need the request body again: the router buffers it, up to
	// the stream's buffer limit; a larger body abandons them
	// (Router::Filter::decodeData, "Give up on the retry/shadow",
	// retry_or_shadow_abandoned) and streams to the one attempt. Mirrors
	// stream their copy alongside the request since Envoy 1.33
	// (envoy.reloadable_features.streaming_shadow), so they get the whole
	// body whatever its size.
	var body []byte
	var streamed io.Reader // the body of an attempt that gave up retries unread
	retries := r.retry != nil
	replay := retries || len(r.mirrors) > 0
	if replay && req.Body != nil {
		rd := io.Reader(req.Body)
		if len(r.mirrors) == 0 {
			rd = io.LimitReader(req.Body, retryShadowBufferLimit+1)
		}
		b, err := io.ReadAll(rd)
		if err != nil {
			return localReply(http.StatusBadRequest, ""), nil, nil
		}
		body = b
		if len(b) > retryShadowBufferLimit {
			retries = false
			if len(r.mirrors) == 0 {
				replay, streamed = false, io.MultiReader(bytes.NewReader(b), req.Body)
			}
		}
	}
	dp.mirror(ac, r, req, body)

	cancel := context.CancelFunc(func() {})
	if r.timeout > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, r.timeout, errRouteTimeout)
	}
	if c.rt.active.Add(1) > int64(c.rt.cfg.maxRequests) {
		c.rt.active.Add(-1)
		cancel()
		resp := localReply(http.StatusServiceUnavailable, bodyOverflow)
		resp.Headers.Set("x-envoy-overloaded", "true")
		return resp, nil, nil
	}
	release := func() { c.rt.active.Add(-1); cancel() }
	picker := newHostPicker(dp, c, md)
	attempts := 1
	if retries {
		attempts += r.retry.numRetries
	}
	var resp *extproc.Response
	var served map[string]*structpb.Struct
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 {
			dp.counters.retries.Add(1)
			// Envoy's JitteredExponentialBackOffStrategy: a random wait
			// below base_interval x 2^(n-1), capped at max_interval.
			if err := sleepCtx(ctx, dp.retryBackOff(r.retry, attempt)); err != nil {
				release()
				if context.Cause(ctx) == errRouteTimeout {
					return localReply(http.StatusGatewayTimeout, bodyUpstreamTimeout), served, nil
				}
				return nil, served, err
			}
		}
		host, ok := picker.pick()
		if !ok {
			release()
			return localReply(http.StatusServiceUnavailable, bodyNoHealthyUpstream), nil, nil
		}
		served = servedMetadata(c.rt.cfg.overrideHost, host)
		var rd io.Reader = req.Body
		switch {
		case replay:
			rd = bytes.NewReader(body)
		case streamed != nil:
			rd = streamed
		}
		// per_try_timeout runs until the attempt's response headers
		// (UpstreamRequest's per-try timer; once the response started
		// downstream, Envoy ignores it), so a timer that cancels the
		// attempt, not a deadline that would also cut the body.
		actx, acancel := context.WithCancelCause(ctx)
		var perTry *time.Timer
		if r.retry != nil && r.retry.perTryTimeout > 0 {
			perTry = time.AfterFunc(r.retry.perTryTimeout, func() { acancel(errPerTryTimeout) })
		}
		up, failure := dp.attempt(actx, c, host, req, rd)
		// Stop reports whether the timer had already fired; its function
		// may not have cancelled actx yet, so that, not the context's
		// cause, says the attempt timed out.
		fired := perTry != nil && !perTry.Stop()
		if fired && failure == "" {
			// The timer fired as the headers arrived: the attempt timed out.
			_ = up.Body.Close()
			up, failure = nil, "reset"
		}
		last := attempt == attempts-1
		if failure != "" {
			timedOut := fired || context.Cause(actx) == errPerTryTimeout
			acancel(nil)
			switch {
			case context.Cause(ctx) == errRouteTimeout:
				release()
				return localReply(http.StatusGatewayTimeout, bodyUpstreamTimeout), served, nil
			case ctx.Err() != nil:
				release()
				return nil, served, ctx.Err()
			case timedOut:
				// onPerTryTimeout: a local reset, retried as resets are
				// (wouldRetryFromReset); the last one is a 504.
				if !last && r.retry.retriesFailure("reset") {
					continue
				}
				release()
				return localReply(http.StatusGatewayTimeout, bodyUpstreamTimeout), served, nil
			case !last && r.retry.retriesFailure(failure):
				continue
			}
			release()
			if failure == "connect" {
				return localReply(http.StatusServiceUnavailable, bodyConnectFailure), served, nil
			}
			return localReply(http.StatusServiceUnavailable, bodyReset), served, nil
		}
		if !last && r.retry.retriesStatus(up.StatusCode) {
			_ = up.Body.Close()
			acancel(nil)
			continue
		}
		routeRelease := release
		release := func() { acancel(nil); routeRelease() }
		if up.StatusCode == http.StatusSwitchingProtocols && req.Upgrade != "" {
			// The upstream accepted the upgrade: from here the stream is a
			// byte tunnel (Envoy's router after an upgrade response; Go's
			// transport hands the connection over as the body).
			rwc, ok := up.Body.(io.ReadWriteCloser)
			if !ok {
				_ = up.Body.Close()
				release()
				return localReply(http.StatusServiceUnavailable, bodyReset), served, nil
			}
			resp = &extproc.Response{Status: up.StatusCode, Headers: up.Header, Body: &upgradedBody{dp: dp, rwc: rwc, release: release}, Trailers: http.Header{}}
			break
		}
		// The response's trailers are known only once its body has ended:
		// Go's HTTP/2 transport sets a new up.Trailer map then, so the map
		// handed on is filled from it at io.EOF (Envoy's router forwards
		// the upstream's trailers downstream, Router::Filter::
		// onUpstreamTrailers; gRPC's status travels in them).
		trailers := http.Header{}
		var body io.ReadCloser = &releaseBody{ReadCloser: up.Body, release: release, up: up, trailers: trailers}
		// A response without a body ends at its headers (end_of_stream on
		// the headers, no body message to the processor), as in Envoy.
		if up.Body == http.NoBody {
			_ = up.Body.Close()
			release()
			body = http.NoBody
		}
		resp = &extproc.Response{Status: up.StatusCode, Headers: up.Header, Body: body, Trailers: trailers}
		break
	}
	if resp == nil {
		release()
		return localReply(http.StatusServiceUnavailable, bodyReset), served, nil
	}
	// An accepted upgrade keeps Connection and Upgrade in the response, as
	// in the request (ConnectionManagerUtility::mutateResponseHeaders);
	// every other response loses its hop-by-hop headers.
	connection, upgrade := resp.Headers.Values("Connection"), resp.Headers.Values("Upgrade")
	removeHopByHop(resp.Headers)
	if _, ok := resp.Body.(*upgradedBody); ok {
		resp.Headers["Connection"], resp.Headers["Upgrade"] = connection, upgrade
	}
	sel.finalizeResponseHeaders(resp.Headers)
	return resp, served, nil
}

// finalizeRequest is RouteEntryImplBase::finalizeRequestHeaders
// (source/common/router/config_impl.cc) as the router calls it before
// forwarding: header mutations, most specific level first, so the route's
// have the final say (most_specific_header_mutations_wins false), then the
// path and host rewrites. A weighted cluster entry's headers and host
// rewrite come before the route's (WeightedClusterEntry::
// finalizeRequestHeaders), so a route's host_rewrite_literal overrides the
// entry's.
func (s routeSel) finalizeRequest(req *extproc.Request) {
	r := s.r
	if s.wc != nil {
		s.wc.reqHeaders.apply(req.Headers)
		if s.wc.hostRewrite != "" {
			req.Authority = s.wc.hostRewrite
		}
	}
	r.reqHeaders.apply(req.Headers)
	rewritePath(r, req)
	if r.hostRewrite != "" {
		req.Authority = r.hostRewrite
	}
}

// finalizeResponseHeaders is RouteEntryImplBase::finalizeResponseHeaders:
// the picked weighted cluster entry's response header mutations, then the
// route's.
func (s routeSel) finalizeResponseHeaders(h http.Header) {
	if s.wc != nil {
		s.wc.respHeaders.apply(h)
	}
	s.r.respHeaders.apply(h)
}

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

func (p *retryPolicy) retriesFailure(kind string) bool {
	if p == nil {
		return false
	}
	switch kind {
	case "connect":
		return p.onConnFail || p.on5xx || p.onGatewayError || p.onReset
	default:
		return p.onReset || p.on5xx || p.onGatewayError
	}
}

// retriesStatus is RetryStateImpl::wouldRetryFromHeaders for a status:
// 5xx any 5xx, gateway-error 502-504, retriable-status-codes the listed
// codes.
func (p *retryPolicy) retriesStatus(code int) bool {
	if p == nil {
		return false
	}
	return (p.on5xx && code >= 500) || (p.onGatewayError && code >= 502 && code <= 504) ||
		(p.onStatusCodes && slices.Contains(p.statusCodes, code))
}

// retryBackOff is the wait before retry n (1-based):
// JitteredExponentialBackOffStrategy::nextBackOffMs
// (source/common/common/backoff_strategy.cc), a random duration below the
// current interval, which starts at base_interval and doubles after each
// retry up to max_interval: below base, 2 x base, 4 x base, ...
func (dp *DataPlane) retryBackOff(p *retryPolicy, n int) time.Duration {
	if p == nil || p.backOffBase <= 0 {
		return 0
	}
	bound := p.backOffMax
	if n <= 30 {
		if b := p.backOffBase << (n - 1); b > 0 && b < bound {
			bound = b
		}
	}
	if bound <= 0 {
		return 0
	}
	return time.Duration(dp.randUnder(uint64(bound)))
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// servedMetadata is the selected_host_key metadata of override_host.
func servedMetadata(oh *overrideHostPolicy, host string) map[string]*structpb.Struct {
	if oh == nil || oh.selected == nil {
		return nil
	}
	var v *structpb.Value = structpb.NewStringValue(host)
	for i := len(oh.selected.path) - 1; i >= 0; i-- {
		v = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{oh.selected.path[i]: v}})
	}
	s := v.GetStructValue()
	if s == nil {
		return nil
	}
	return map[string]*structpb.Struct{oh.selected.namespace: s}
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

// rewritePath applies prefix_rewrite or regex_rewrite to the path (the
// query string is kept), recording the original in x-envoy-original-path.
func rewritePath(r *route, req *extproc.Request) {
	if !r.hasPrefixRW && r.regexRewrite == nil {
		return
	}
	path, query, hasQuery := strings.Cut(req.Path, "?")
	np := path
	switch {
	case r.regexRewrite != nil:
		np = r.regexRewrite.re.ReplaceAllString(path, r.regexRewrite.subst)
	case r.match.kind == "path":
		np = r.prefixRewrite
	default:
		np = r.prefixRewrite + strings.TrimPrefix(path, r.match.value)
	}
	if np == path {
		return
	}
	req.Headers.Set("x-envoy-original-path", req.Path)
	if hasQuery {
		np += "?" + query
	}
	req.Path = np
}

// directReply is the router's answer on a redirect or direct_response
// route (Router::Filter::decodeHeaders, source/common/router/router.cc): a
// local reply whose modify_headers sets Location to newURI when the status
// is 201 or 3xx (RFC 7231 7.1.2), then applies the route's response header
// mutations (finalizeResponseHeaders), both before the local reply sets
// the body's content-length and content-type (extproc.LocalReply). So a
// route's content-type stays, its content-length gives way to the body's,
// and a reply without a body has neither.
func directReply(r *route, req *extproc.Request) *extproc.Response {
	status, body := directResponseOf(r)
	return extproc.LocalReply(status, body, func(h http.Header) {
		if status == http.StatusCreated || status >= 300 && status < 400 {
			h.Set("location", newURI(r, req))
		}
		r.respHeaders.apply(h)
	})
}

// directResponseOf is a redirect or direct_response route's status and
// body: RedirectAction.response_code and no body, or
// DirectResponseAction's status and body.
func directResponseOf(r *route) (int, string) {
	if r.kind == actionRedirect {
		return redirectCode(r.redirect), ""
	}
	return r.direct.status, string(r.direct.body)
}

// redirectCode is RedirectAction.response_code as an HTTP status.
func redirectCode(ra *routev3.RedirectAction) int {
	return map[int32]int{0: 301, 1: 302, 2: 303, 3: 307, 4: 308}[int32(ra.GetResponseCode())]
}

// newURI is RouteEntryImplBase::newUri: the URI Envoy's
// Http::Utility::newUri (source/common/http/utility.cc) builds from the
// route's redirect (none for a direct_response route: the request's own
// URI). The scheme is scheme_redirect, else the request's (https_redirect
// is refused as not implemented, allowed.go); the port is port_redirect
// alone (":N", never dropped, even when N is the scheme's well-known
// port); the host is host_redirect as written when set (the request's port
// goes with the request's host), else the request's Host with its port
// removed when a port_redirect is given, or when the scheme changes and
// the port is the default one of x-forwarded-proto's scheme
// (processRequestHost).
func newURI(r *route, req *extproc.Request) string {
	ra := r.redirect
	scheme := req.Scheme
	if s := ra.GetSchemeRedirect(); s != "" {
		scheme = s
	}
	port := ""
	if p := ra.GetPortRedirect(); p != 0 {
		port = fmt.Sprintf(":%d", p)
	}
	authority := ra.GetHostRedirect()
	if authority == "" {
		authority = redirectRequestHost(req, scheme, port)
	}
	authority += port
	pathQ := req.Path
	switch {
	case ra.GetPathRedirect() != "":
		_, q, hasQ := strings.Cut(req.Path, "?")
		pathQ = ra.GetPathRedirect()
		if !strings.Contains(pathQ, "?") && hasQ {
			pathQ += "?" + q
		}
	case ra.GetPrefixRewrite() != "" || ra.GetRegexRewrite() != nil:
		tmp := &route{match: r.match, prefixRewrite: ra.GetPrefixRewrite(), hasPrefixRW: ra.GetPrefixRewrite() != ""}
		if rr := ra.GetRegexRewrite(); rr != nil {
			tmp.regexRewrite, _ = compileRegexRewrite(rr, recompile) // compiled once already at config time
		}
		cp := &extproc.Request{Path: req.Path, Headers: http.Header{}}
		rewritePath(tmp, cp)
		pathQ = cp.Path
	}
	return scheme + "://" + authority + pathQ
}

// redirectRequestHost is Envoy's processRequestHost
// (source/common/http/utility.cc): the request's Host, without its port
// when the redirect gives a port, or when the scheme changes and the
// port is the default one of the request's x-forwarded-proto.
func redirectRequestHost(req *extproc.Request, newScheme, newPort string) string {
	host := req.Authority
	end := hostPortStart(host) // Envoy finds it the same way here
	if end < 0 {
		return host
	}
	reqPort := host[end:]
	proto := req.Headers.Get("x-forwarded-proto")
	remove := newPort != ""
	if newScheme != proto {
		remove = remove || (proto == "https" && reqPort == ":443") || (proto == "http" && reqPort == ":80")
	}
	if remove {
		return host[:end]
	}
	return host
}

// localReply is a response Envoy generates itself with no modify_headers
// of its caller (extproc.LocalReply): a body gets content-type text/plain
// and its content-length, no body neither. The site that knows the
// request turns it into gRPC form for a gRPC request
// (extproc.GRPCLocalReply): the router branch of filterChain.decode for the
// router's replies (direct responses, redirects, no cluster, no healthy
// upstream, timeouts, resets), the connection manager in handler.go for
// its own.
func localReply(status int, body string) *extproc.Response {
	return extproc.LocalReply(status, body, nil)
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

// mirror sends a copy of the request to each mirror cluster (sampled by
// runtime_fraction's default_value), with "-shadow" appended to the host
// before its port (shadowAppendedHost in source/common/router/
// shadow_writer_impl.cc, which finds the port as getPortStart does), and
// discards the answer (ShadowWriterImpl::shadow: fire and forget).
func (dp *DataPlane) mirror(ac *activeConfig, r *route, req *extproc.Request, body []byte) {
	for _, m := range r.mirrors {
		if m.denominator > 0 && dp.randUnder(m.denominator) >= m.numerator {
			continue
		}
		c := ac.clusters[m.cluster]
		if c == nil || len(c.addrs) == 0 {
			continue
		}
		host := c.rt.roundRobin(c.addrs)
		cp := &extproc.Request{Method: req.Method, Path: req.Path, Scheme: req.Scheme, Headers: req.Headers.Clone()}
		cp.Authority = shadowHost(req.Authority)
		go func() {
			// Fire and forget, bounded by the cluster's connect timeout and
			// a fixed deadline.
			ctx, cancel := context.WithTimeout(context.Background(), mirrorTimeout)
			defer cancel()
			if resp, failure := dp.attempt(ctx, c, host, cp, bytes.NewReader(body)); failure == "" {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
}

// shadowHost is Envoy's shadowAppendedHost: "-shadow" before the port
// (hostPortStart), else at the end; "[::1]:80" becomes "[::1]-shadow:80".
func shadowHost(host string) string {
	if i := hostPortStart(host); i >= 0 {
		return host[:i] + "-shadow" + host[i:]
	}
	return host + "-shadow"
}

// dialGRPC is the extproc.Dialer: a gRPC connection to one endpoint of an
// HTTP/2 cluster (round robin), with the cluster's TLS, cached per cluster
// version, endpoint and authority.
func (dp *DataPlane) dialGRPC(ctx context.Context, cluster, authority string) (grpc.ClientConnInterface, error) {
	c := dp.active.Load().clusters[cluster]
	if c == nil {
		return nil, fmt.Errorf("ext_proc: cluster %q: %w", cluster, errNoCluster)
	}
	if !c.rt.cfg.http2 {
		return nil, fmt.Errorf("ext_proc: cluster %q is not HTTP/2", cluster)
	}
	if len(c.addrs) == 0 {
		return nil, fmt.Errorf("ext_proc: cluster %q: %s", cluster, bodyNoHealthyUpstream)
	}
	if authority == "" {
		authority = cluster
	}
	addr := c.rt.roundRobin(c.addrs)
	key := fmt.Sprintf("%p|%s|%s", c.rt, addr, authority)
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return nil, errors.New("ext_proc: data plane stopped")
	}
	if cc := dp.grpcConns[key]; cc != nil {
		return cc, nil
	}
	creds := insecure.NewCredentials()
	if c.rt.cfg.tls != nil {
		creds = credentials.NewTLS(c.rt.cfg.tls.Clone())
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	// grpc-go refuses an authority that differs from the TLS ServerName;
	// with SNI set, the authority is the SNI (Envoy sends the cluster name
	// as :authority and the SNI separately: see architecture/dataplane.md).
	if c.rt.cfg.tls == nil || c.rt.cfg.tls.ServerName == "" {
		opts = append(opts, grpc.WithAuthority(authority))
	}
	timeout := c.rt.cfg.connectTimeout
	opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if dp.opts.Dial != nil {
			return dp.opts.Dial(ctx, "tcp", a)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", a)
	}))
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, err
	}
	dp.grpcConns[key] = cc
	return cc, nil
}
