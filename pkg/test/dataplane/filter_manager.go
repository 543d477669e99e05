// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"net/http"
	"sync"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// filterManager is one request's HTTP filters, run as Envoy's FilterManager
// runs them (source/common/http/filter_manager.cc, filter_manager.h):
//
//   - filters are created once, for the route selected when the request's
//     headers arrive: one whose HttpFilter is disabled is created only
//     when that route (its virtual host, the route or its weighted
//     cluster) carries per-filter config for it (FilterChainUtility::
//     createFilterChainForFactories asks the route's filterDisabled, which
//     falls back to its virtual host's); without a route, only the filters
//     that are not disabled (source/common/http/filter_chain_helper.cc,
//     conn_manager_impl.cc);
//   - a filter reads its per-route configuration when its decodeHeaders
//     runs, from the route selected at that time: after a filter cleared
//     the route cache (ext_proc, Request.RouteCacheCleared) the route is
//     selected again on the changed request, which the later filters and
//     the router see, and the connection manager re-arms
//     max_stream_duration with the new route's (refreshCachedRoute,
//     refreshDurationTimeout);
//   - decodeHeaders runs in configuration order, then the router;
//   - encoder filters run in reverse configuration order
//     (addStreamEncoderFilter prepends to encoder_filters_);
//   - a response a decoder filter starts itself (the CORS filter's
//     preflight answer through ActiveStreamDecoderFilter::encodeHeaders,
//     or a sendLocalReply before any response headers) goes through
//     FilterManager::encodeHeaders(nullptr, ...), whose commonEncodePrefix
//     starts at encoder_filters_.begin(): every encoder filter, including
//     those configured after that filter whose decodeHeaders never ran;
//   - a local reply sent once response headers exist is written directly
//     (sendDirectLocalReply, extproc.Response.Direct) and no encoder filter
//     touches it.
//
// Filters here are nested: filter i's decode calls decode(i+1) and its
// encode applies to what that returns. A local reply made by filter i is
// first passed through the encoder side of filters n-1..i+1 (encodeOnly),
// then filter i's own encode, and returns up through filters i-1..0.
type filterManager struct {
	dp      *DataPlane
	ac      *activeConfig
	table   *routeTable
	sel     routeSel
	pf      perFilterConfig
	filters []*httpFilter
	// onRoute is told each route selected again (the connection
	// manager's max_stream_duration).
	onRoute func(routeSel)
	// cors holds the state of each CORS filter whose decodeHeaders ran,
	// for the connection manager's own local replies (hcmReply). Filters
	// after ext_proc decode on its upstream goroutine, hence the lock.
	mu   sync.Mutex
	cors []corsState
}

func newFilterManager(dp *DataPlane, ac *activeConfig, l *listenerConfig, table *routeTable, sel routeSel, onRoute func(routeSel)) *filterManager {
	c := &filterManager{dp: dp, ac: ac, table: table, sel: sel, pf: sel.perFilter(), onRoute: onRoute}
	for i := range l.filters {
		f := &l.filters[i]
		if f.disabled && !c.pf.has(f.name) {
			continue // not created for this route
		}
		c.filters = append(c.filters, f)
	}
	return c
}

// reroute is the route selected again after a filter cleared the route
// cache: the same weighted pick when the route stays (Envoy's stream id
// keeps it), no route when none matches.
func (c *filterManager) reroute(req *extproc.Request) {
	s2, ok := c.dp.selectRoute(c.table, req)
	if !ok {
		s2 = routeSel{}
	}
	if s2.r != c.sel.r {
		c.sel = s2
	}
	c.pf = c.sel.perFilter()
	if c.onRoute != nil {
		c.onRoute(c.sel)
	}
}

// run decodes req through every filter and the router and returns the
// response as the encoder filters left it.
func (c *filterManager) run(ctx context.Context, req *extproc.Request) (*extproc.Response, error) {
	resp, _, err := c.decode(ctx, 0, req, nil)
	return resp, err
}

// decode is filter i's decodeHeaders onwards (the router when i is past
// the last filter); it has the shape of extproc.Upstream so that ext_proc
// can wrap the rest of the chain.
func (c *filterManager) decode(ctx context.Context, i int, req *extproc.Request, md map[string]*structpb.Struct) (*extproc.Response, map[string]*structpb.Struct, error) {
	if i == len(c.filters) {
		resp, served, err := c.dp.router(ctx, c.ac, c.sel, req, md)
		if resp != nil && resp.Local {
			// The router's sendLocalReply, in gRPC form for a gRPC request.
			extproc.GRPCLocalReply(req, resp, -1)
		}
		return resp, served, err
	}
	if c.filters[i].extAuthz != nil {
		return c.decodeExtAuthz(ctx, i, req, md)
	}
	switch c.filters[i].kind {
	case filterCORS:
		return c.decodeCORS(ctx, i, req, md)
	case filterExtProc:
		return c.decodeExtProc(ctx, i, req, md)
	}
	return c.decode(ctx, i+1, req, md)
}

func (c *filterManager) decodeCORS(ctx context.Context, i int, req *extproc.Request, md map[string]*structpb.Struct) (*extproc.Response, map[string]*structpb.Struct, error) {
	st, reply := corsDecode(c.pf.cors, req)
	c.mu.Lock()
	c.cors = append(c.cors, st)
	c.mu.Unlock()
	if reply != nil {
		resp, err := c.localReply(ctx, i, reply)
		if resp != nil && !resp.Direct {
			st.encode(resp.Headers)
		}
		return resp, nil, err
	}
	resp, served, err := c.decode(ctx, i+1, req, md)
	if resp != nil && !resp.Direct {
		st.encode(resp.Headers)
	}
	return resp, served, err
}

func (c *filterManager) decodeExtProc(ctx context.Context, i int, req *extproc.Request, md map[string]*structpb.Struct) (*extproc.Response, map[string]*structpb.Struct, error) {
	f := c.filters[i]
	// The filter exists, so it runs with its per-route configuration as
	// it finds it now, or else its own (Filter::mergePerRouteConfig).
	cfg, run, err := extproc.Effective(f.extProc, false, c.pf.extProc[f.name])
	switch {
	case err != nil:
		c.dp.log.Error("dataplane: ext_proc config", "filter", f.name, "route", c.sel.name(), "error", err)
		return extproc.GRPCLocalReply(req, localReply(http.StatusInternalServerError, ""), -1), nil, nil
	case !run:
		return c.decode(ctx, i+1, req, md)
	case req.Upgrade != "":
		// Stricter than Envoy, whose ext_proc would see the upgraded
		// stream's bytes as body: not implemented here, so refused.
		c.dp.log.Error("dataplane: ext_proc on an upgraded stream is not implemented", "route", c.sel.name(), "upgrade", req.Upgrade)
		return extproc.GRPCLocalReply(req, localReply(http.StatusInternalServerError, ""), -1), nil, nil
	}
	cfg.Counters = &c.dp.extProc
	up := func(ctx2 context.Context, req2 *extproc.Request, md2 map[string]*structpb.Struct) (*extproc.Response, map[string]*structpb.Struct, error) {
		if req2.RouteCacheCleared {
			req2.RouteCacheCleared = false
			c.reroute(req2)
		}
		return c.decode(ctx2, i+1, req2, mergeMetadata(md, md2))
	}
	resp, err := extproc.Process(ctx, cfg, c.dp.dialGRPC, req, up)
	return resp, nil, err
}

// localReply sends a reply made by filter i through the encoder side of
// the filters after it (in encoder order), whose decodeHeaders never ran.
func (c *filterManager) localReply(ctx context.Context, i int, resp *extproc.Response) (*extproc.Response, error) {
	for k := len(c.filters) - 1; k > i; k-- {
		if resp.Direct {
			return resp, nil
		}
		var err error
		if resp, err = c.encodeOnly(ctx, k, resp); err != nil || resp == nil {
			return resp, err
		}
	}
	return resp, nil
}

// encodeOnly is filter k's encodeHeaders for a response whose request it
// never decoded: the CORS filter does nothing (is_cors_request_ is false);
// ext_proc merges its per-route config and processes the response
// (extproc.ProcessResponse).
func (c *filterManager) encodeOnly(ctx context.Context, k int, resp *extproc.Response) (*extproc.Response, error) {
	f := c.filters[k]
	if f.kind != filterExtProc {
		return resp, nil
	}
	cfg, run, err := extproc.Effective(f.extProc, false, c.pf.extProc[f.name])
	if err != nil {
		c.dp.log.Error("dataplane: ext_proc config", "filter", f.name, "route", c.sel.name(), "error", err)
		return &extproc.Response{Status: http.StatusInternalServerError, Headers: http.Header{}, Body: http.NoBody, Trailers: http.Header{}, Direct: true}, nil
	}
	if !run {
		return resp, nil
	}
	cfg.Counters = &c.dp.extProc
	return extproc.ProcessResponse(ctx, cfg, c.dp.dialGRPC, resp)
}

// hcmReply passes a local reply of the connection manager itself (the
// max_stream_duration 504/408) through the CORS filters that decoded the
// request, in encoder order. ext_proc's encode is not run for it (see
// architecture/dataplane.md).
func (c *filterManager) hcmReply(resp *extproc.Response) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := len(c.cors) - 1; k >= 0; k-- {
		c.cors[k].encode(resp.Headers)
	}
}

func mergeMetadata(a, b map[string]*structpb.Struct) map[string]*structpb.Struct {
	if len(a) == 0 {
		return b
	}
	out := make(map[string]*structpb.Struct, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
