// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
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
