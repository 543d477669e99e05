// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// routeEntry is one Envoy route with its precedence key.
type routeEntry struct {
	key   orderKey
	route *routev3.Route
}

// BuildRouteConfigurations returns one RouteConfiguration per HTTP
// listener port, named RouteConfigName(port, false), and one per Gateway
// listener of an HTTPS port, named ChainRouteConfigName(port, listener),
// sorted by name.
//
// Virtual hosts: one per hostname a route serves on the port (see
// routeHostnames), named "<hostname>:<port>", domains [hostname] (the
// route configuration sets ignore_port_in_host_matching, so a Host with a
// port selects the same virtual host and the backend still sees the port,
// as the Gateway API's HTTPRouteHostnameIntersection requires); "*" is the
// catch-all. Within a virtual host, routes are in Gateway API precedence
// order (orderKey).
//
// Listener isolation (GEP-2465): a request is served only by the routes of
// the listener whose hostname matches its Host best (exact, then the
// longest wildcard, then the listener without hostname), so a route
// hostname is served through a listener only when that listener owns it
// (ownerHostname), and a listener hostname that a broader virtual host
// would otherwise catch gets its own virtual host, empty when no route
// serves it (a 404, not another listener's routes). On an HTTPS port each
// listener's filter chain has its own configuration: its own hostnames,
// and 421 (misdirected request) for the port's other listeners' hostnames,
// and for any other Host when the listener has a hostname
// (misdirectedVirtualHost).
//
// Every Gateway API match of every rule becomes one Envoy route named
// "<namespace>.<name>.<rule index>" (routes of one rule share the name).
// What a rule does is documented on buildAction. A rule with a CORS filter
// and an InferencePool backend gets, just before each of its routes, one
// that answers CORS preflights without the EPP (preflightRoute).
func BuildRouteConfigurations(gw *model.Gateway, opts Options) ([]*routev3.RouteConfiguration, error) {
	opts = opts.WithDefaults()
	opts.eppBodyMode, opts.gatewayNamespace = gw.EPPBodyMode, gw.Namespace
	opts.extAuthz = gatewayExtAuthz(gw)
	groups, err := groupByPort(gw)
	if err != nil {
		return nil, err
	}
	out := make([]*routev3.RouteConfiguration, 0, len(groups))
	for _, g := range groups {
		chains := []int{-1} // an HTTP port: one configuration
		if g.tls {
			chains = chains[:0]
			for i := range g.listeners {
				chains = append(chains, i)
			}
		}
		for _, chain := range chains {
			rc, err := buildRouteConfiguration(g, chain, opts)
			if err != nil {
				return nil, err
			}
			out = append(out, rc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type vhost struct {
	entries []routeEntry
	seen    map[*model.Route]bool
}

// buildRouteConfiguration is the route configuration of port group g:
// every listener's routes when chain < 0 (an HTTP port), else those of
// g.listeners[chain] alone, with 421 for what the others own (an HTTPS
// filter chain).
func buildRouteConfiguration(g portGroup, chain int, opts Options) (*routev3.RouteConfiguration, error) {
	vhosts := map[string]*vhost{}
	built := map[*model.Route][]routeEntry{}
	memo := anyMemo{}
	listenerHosts := make([]string, len(g.listeners))
	for i, l := range g.listeners {
		listenerHosts[i] = l.Hostname
	}
	for i, l := range g.listeners {
		if chain >= 0 && i != chain {
			continue
		}
		for _, r := range l.Routes {
			hosts := routeHostnames(l.Hostname, r.Hostnames)
			if len(hosts) == 0 {
				continue
			}
			entries, ok := built[r]
			if !ok {
				entries = buildRoutes(r, g, opts, memo)
				built[r] = entries
			}
			for _, h := range hosts {
				if ownerHostname(h, listenerHosts) != l.Hostname {
					continue // a more specific listener owns h (GEP-2465)
				}
				vh := vhosts[h]
				if vh == nil {
					vh = &vhost{seen: map[*model.Route]bool{}}
					vhosts[h] = vh
				}
				if vh.seen[r] {
					continue
				}
				vh.seen[r] = true
				vh.entries = append(vh.entries, withHostKey(entries, h, r.Hostnames)...)
			}
		}
	}
	// A listener with filters has a virtual host for its own hostname
	// ("*" without one), so that its filters run on every request it
	// accepts, also for a Host no route of it serves (listenerfilter.go).
	for i, l := range g.listeners {
		if (chain >= 0 && i != chain) || (len(l.Filters) == 0 && l.FilterError == "") {
			continue
		}
		h := l.Hostname
		if h == "" {
			h = "*"
		}
		if vhosts[h] == nil {
			vhosts[h] = &vhost{seen: map[*model.Route]bool{}}
		}
	}
	filterCfg, err := groupListenerFilterConfig(g, chain)
	if err != nil {
		return nil, err
	}
	var misdirected []string
	if chain < 0 {
		// A listener hostname that a broader virtual host would catch gets
		// its own, so its Host never reaches another listener's routes.
		for _, h := range listenerHosts {
			if h != "" && vhosts[h] == nil && caughtByOther(h, vhosts) {
				vhosts[h] = &vhost{seen: map[*model.Route]bool{}}
			}
		}
	} else {
		own := g.listeners[chain].Hostname
		if own != "" && vhosts[own] == nil {
			vhosts[own] = &vhost{seen: map[*model.Route]bool{}} // its Host is ours: 404, not 421
		}
		misdirected = misdirectedDomains(own, listenerHosts)
	}
	names := make([]string, 0, len(vhosts))
	for h := range vhosts {
		names = append(names, h)
	}
	sort.Strings(names)
	rc := &routev3.RouteConfiguration{
		Name:                     RouteConfigName(g.port, g.tls),
		ValidateClusters:         wrapperspb.Bool(false),
		IgnorePortInHostMatching: true,
	}
	if chain >= 0 {
		rc.Name = ChainRouteConfigName(g.port, g.listeners[chain].Name)
	}
	port := strconv.FormatUint(uint64(g.port), 10)
	for _, h := range names {
		vh := virtualHost(h, port, vhosts[h].entries)
		if li := vhostListener(g, chain, listenerHosts, h); li >= 0 {
			switch {
			case g.listeners[li].FilterError != "":
				filterErrorVirtualHost(vh)
			case filterCfg[li] != nil:
				listenerFilterVirtualHost(vh, filterCfg[li])
			}
		}
		rc.VirtualHosts = append(rc.VirtualHosts, vh)
	}
	if len(misdirected) > 0 {
		rc.VirtualHosts = append(rc.VirtualHosts, misdirectedVirtualHost(misdirected, port))
	}
	if len(hcmListenerFilters(g, chain)) > 0 {
		if err := disableExtAuthz(rc.VirtualHosts, opts.extAuthz); err != nil {
			return nil, err
		}
	}
	return rc, nil
}

// virtualHost is the virtual host of hostname h on port: entries (sorted
// here, in place) in Gateway API precedence order.
func virtualHost(h, port string, entries []routeEntry) *routev3.VirtualHost {
	sortEntries(entries)
	v := &routev3.VirtualHost{Name: h + ":" + port, Domains: []string{h}}
	for _, e := range entries {
		v.Routes = append(v.Routes, e.route)
	}
	return v
}

// ownerHostname is the hostname of the listeners that own Host pattern h
// among a port's listener hostnames (GEP-2465): h itself when a listener
// has it, else the longest wildcard that covers it, else "" (the
// listeners without hostname).
func ownerHostname(h string, listenerHosts []string) string {
	best := ""
	for _, lh := range listenerHosts {
		switch {
		case lh == h:
			return h
		case covers(lh, h) && len(lh) > len(best):
			best = lh
		}
	}
	return best
}

// caughtByOther reports whether a virtual host other than h's own would
// take h's requests: "*", or a wildcard that covers h.
func caughtByOther(h string, vhosts map[string]*vhost) bool {
	for d := range vhosts {
		if d != h && (d == "*" || covers(d, h)) {
			return true
		}
	}
	return false
}

// misdirectedDomains are the domains that the route configuration of one
// listener's own filter chain (an HTTPS listener with hostname own)
// answers 421: the other listeners' hostnames of the port (listenerHosts),
// and every other Host when own is set, sorted. nil when there are none.
// The full and the incremental translation both ask it.
func misdirectedDomains(own string, listenerHosts []string) []string {
	var out []string
	for _, h := range listenerHosts {
		if h != "" && h != own && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	if own != "" {
		out = append(out, "*")
	}
	sort.Strings(out)
	return out
}

// misdirectedVirtualHost answers 421 Misdirected Request (RFC 9110
// 15.5.20) on an HTTPS filter chain for Hosts that belong to the port's
// other listeners: the TLS server name chose this listener's certificate
// and chain, and the client should open a connection for that Host.
func misdirectedVirtualHost(domains []string, port string) *routev3.VirtualHost {
	return &routev3.VirtualHost{
		Name:    "misdirected:" + port,
		Domains: domains,
		Routes: []*routev3.Route{{
			Name:   "misdirected",
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: http.StatusMisdirectedRequest}},
		}},
	}
}

// buildRoutes translates every match of every rule of r (buildRule). A
// rule that cannot be served is left out, so its requests fall to the
// Gateway's other routes; the controller reports it in the route's status
// from the same check (CheckRoute), so it is only logged at debug level
// here, where every translation of the Gateway would repeat it.
func buildRoutes(r *model.Route, g portGroup, opts Options, memo anyMemo) []routeEntry {
	var out []routeEntry
	for ri := range r.Rules {
		entries, p := buildRule(r, &r.Rules[ri], g, opts, memo)
		if p != nil {
			slog.Debug("xds: route rule cannot be served; it is left out",
				"route", r.Kind+"/"+r.Namespace+"/"+r.Name, "problem", p.String())
			continue
		}
		out = append(out, entries...)
	}
	return out
}

// ruleFiltersOf returns the rule's own filters.
func ruleFiltersOf(rule *model.Rule) ruleFilters {
	if rule.HTTP != nil {
		return httpFilters(rule.HTTP.Filters, true)
	}
	return grpcFilters(rule.GRPC.Filters)
}

func backendFiltersOf(b *model.Backend) ruleFilters {
	if len(b.GRPCFilters) > 0 {
		return grpcFilters(b.GRPCFilters)
	}
	return httpFilters(b.HTTPFilters, false)
}

// buildAction is what one rule does for one of its matches, filters first:
//
//   - an unsupported filter (ExtensionRef), or an ExternalAuth filter that
//     cannot be configured (its backendRef did not resolve):
//     direct_response 500, the rule is not served without it;
//   - each usable ExternalAuth filter enables its ext_authz filter in
//     typed_per_filter_config (enableExtAuthz), whatever the action;
//   - RequestRedirect: Route.redirect, backends ignored;
//   - otherwise the backends (see backendAction), plus URLRewrite,
//     RequestMirror and the timeout on the RouteAction;
//   - RequestHeaderModifier / ResponseHeaderModifier on the route in every
//     case;
//   - CORS and an InferencePool's ext_proc override in typed_per_filter_config,
//     one map both are added to, so neither erases the other (Istio bug 3).
//
// Timeout: HTTPRoute timeouts.request D, set as both
// RouteAction.max_stream_duration.max_stream_duration and
// RouteAction.timeout. Envoy's HTTP connection manager counts
// max_stream_duration from the start of the downstream stream, so D also
// bounds a request held by an ext_proc server that never answers (a hung
// EPP: FULL_DUPLEX_STREAMED has no per-message timeout, and the router's
// RouteAction.timeout only starts once the request reaches the router).
// Envoy answers 504 "downstream duration timeout" (408 when the request
// body was not fully received) and resets a response already started.
// With max_stream_duration present Envoy ignores RouteAction.timeout; it
// is kept at D so that readers of the route (istioctl-style tables, config
// dumps) see the figure the user set. This matches the Gateway API's
// "as close to the whole request-response transaction as possible".
// With no timeout (or "0s"): RouteAction.timeout 0s and no
// max_stream_duration, which disables Envoy's 15 s default that would cut
// long LLM streams.
func buildAction(r *model.Route, rule *model.Rule, m matchResult, g portGroup, opts Options) (*routev3.Route, error) {
	rt := &routev3.Route{}
	f := ruleFiltersOf(rule)
	req, resp := toHeaderMods(f.reqHeaders, requestHeaders), toHeaderMods(f.respHeaders, responseHeaders)
	if err := refusedMods(req, resp); err != nil {
		return nil, err
	}
	rt.RequestHeadersToAdd, rt.RequestHeadersToRemove = req.add, req.remove
	rt.ResponseHeadersToAdd, rt.ResponseHeadersToRemove = resp.add, resp.remove
	perFilter := map[string]*anypb.Any{}
	if f.cors != nil {
		a, err := toAny(corsPolicy(f.cors))
		if err != nil {
			return nil, err
		}
		perFilter[FilterCORS] = a
	}

	authzOK, err := enableExtAuthz(perFilter, rule)
	if err != nil {
		return nil, err
	}
	switch {
	case f.unsupported != "" || !authzOK:
		rt.Action = directResponse500()
	case f.redirect != nil:
		ra, err := redirectAction(f.redirect, m.prefix, g.port, g.tls)
		if err != nil {
			return nil, err
		}
		rt.Action = &routev3.Route_Redirect{Redirect: ra}
	default:
		if err := forwardAction(rt, perFilter, r, rule, f, req.host, m, opts); err != nil {
			return nil, err
		}
	}
	if len(perFilter) > 0 {
		rt.TypedPerFilterConfig = perFilter
	}
	return rt, nil
}

// forwardAction sets rt's action to the rule's backends (or a direct 500)
// with URLRewrite, RequestMirror and the timeout, and adds a single pool's
// ext_proc override to perFilter.
//
// The upstream Host (RouteAction.host_rewrite_literal; Envoy refuses Host
// in headers_to_add, see headerMods) is, most important first: the rule's
// URLRewrite hostname, the rule's RequestHeaderModifier Host (set, else
// add), the backendRef's RequestHeaderModifier Host. With several
// backends a backendRef's Host sits on its weighted cluster entry, and
// only when the rule sets none: Envoy applies the route's rewrite after
// the entry's (WeightedClusterEntry::finalizeRequestHeaders in
// source/common/router/config_impl.cc), so one backend or several, the
// rule's Host wins. A backendRef's URLRewrite hostname stands before its
// header Host; its path rewrite applies as the rule's would, and a rule and
// its single backendRef that both have a URLRewrite are refused (one
// rewrite per Envoy route).
func forwardAction(rt *routev3.Route, perFilter map[string]*anypb.Any, r *model.Route, rule *model.Rule, f ruleFilters, ruleHost string, m matchResult, opts Options) error {
	if f.rewrite != nil && f.rewrite.Hostname != nil {
		ruleHost = string(*f.rewrite.Hostname)
	}
	ra, shares, err := backendAction(rule.Backends, ruleHost != "", rule.GRPC != nil, opts)
	if err != nil {
		return err
	}
	for _, s := range shares {
		if err := refusedMods(s.req, s.resp); err != nil {
			return err
		}
	}
	if ra == nil {
		rt.Action = directResponse500()
		return nil
	}
	rewrite := f.rewrite
	if ra.GetCluster() != "" {
		single := shares[0]
		if single.rewrite != nil {
			if f.rewrite != nil {
				// Envoy has one path rewrite per route: two would leave one out.
				return fmt.Errorf("a URLRewrite on both the rule and its backendRef: Envoy applies one rewrite per route")
			}
			rewrite = single.rewrite
		}
		if single.extProc != nil {
			perFilter[FilterExtProc] = single.extProc
		}
		rt.RequestHeadersToAdd = append(rt.RequestHeadersToAdd, single.req.add...)
		rt.RequestHeadersToRemove = append(rt.RequestHeadersToRemove, single.req.remove...)
		rt.ResponseHeadersToAdd = append(rt.ResponseHeadersToAdd, single.resp.add...)
		rt.ResponseHeadersToRemove = append(rt.ResponseHeadersToRemove, single.resp.remove...)
		if ruleHost == "" {
			ruleHost = single.req.host
		}
	}
	if ruleHost != "" {
		ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: ruleHost}
	}
	if rewrite != nil {
		// The hostname is in ruleHost already (the rule's, else the
		// backendRef's): only the path is left to apply.
		pathOnly := *rewrite
		pathOnly.Hostname = nil
		if err := applyRewrite(ra, &pathOnly, m.prefix); err != nil {
			return err
		}
	}
	for _, mf := range f.mirrors {
		c, err := mirrorService(mf.BackendRef, r.Namespace, opts.ClusterDomain)
		if err != nil {
			return err
		}
		if !mirrorReachable(rule, c, opts) {
			continue // no copy at all rather than one without its TLS
		}
		ra.RequestMirrorPolicies = append(ra.RequestMirrorPolicies, mirrorPolicy(mf, c))
	}
	timeout, err := ruleTimeout(rule)
	if err != nil {
		return err
	}
	backendTimeout, err := ruleBackendTimeout(rule)
	if err != nil {
		return err
	}
	ra.Timeout = durationpb.New(timeout)
	if timeout > 0 {
		ra.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(timeout)}
	}
	rp, err := retryPolicy(rule)
	if err != nil {
		return err
	}
	switch {
	case backendTimeout < 0:
	case rp == nil && timeout == 0:
		// One request to the backend is the whole of the router's work:
		// its timeout, from the end of the downstream request to the end
		// of the response ("0s": none).
		ra.Timeout = durationpb.New(backendTimeout)
	case backendTimeout > 0:
		// With max_stream_duration Envoy ignores RouteAction.timeout (its
		// "new timeouts"), and with retries the bound is per attempt:
		// per_try_timeout, which Envoy applies to every attempt, the first
		// included, until its response headers.
		if rp == nil {
			rp = &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0)}
		}
		rp.PerTryTimeout = durationpb.New(backendTimeout)
	}
	ra.RetryPolicy = rp
	rt.Action = &routev3.Route_Route{Route: ra}
	return nil
}

func directResponse500() *routev3.Route_DirectResponse {
	return &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 500}}
}

// ruleTimeout is HTTPRoute timeouts.request (a Gateway API duration, e.g.
// "10s", "1h30m", "500ms"); 0 (no timeout) when unset or for GRPCRoute.
func ruleTimeout(rule *model.Rule) (time.Duration, error) {
	if rule.HTTP == nil || rule.HTTP.Timeouts == nil || rule.HTTP.Timeouts.Request == nil {
		return 0, nil
	}
	return gatewayDuration("timeouts.request", *rule.HTTP.Timeouts.Request)
}

// gatewayDuration parses a Gateway API duration (GEP-2257, a subset of
// Go's), refusing a negative one; field names it in the error.
func gatewayDuration(field string, v gwv1.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(string(v))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s %s is negative", field, d)
	}
	return d, nil
}

// retryPolicy is HTTPRoute retry (experimental channel) as Envoy's
// RetryPolicy, nil when unset: retry_on connect-failure and reset (the
// Gateway API: implementations SHOULD retry on connection errors when a
// retry stanza is configured; reset also covers a per_try_timeout) and
// retriable-status-codes with codes; num_retries attempts (Envoy's default,
// 1, when unset); retry_back_off.base_interval backoff. Envoy's back-off is
// jittered below base x 2^(n-1), so a first retry may come sooner than
// backoff, which the Gateway API calls a minimum (architecture/xds.md).
func retryPolicy(rule *model.Rule) (*routev3.RetryPolicy, error) {
	if rule.HTTP == nil || rule.HTTP.Retry == nil {
		return nil, nil
	}
	r := rule.HTTP.Retry
	rp := &routev3.RetryPolicy{RetryOn: "connect-failure,reset,retriable-status-codes"}
	for _, c := range r.Codes {
		rp.RetriableStatusCodes = append(rp.RetriableStatusCodes, uint32(c))
	}
	if r.Attempts != nil {
		if *r.Attempts < 0 {
			return nil, fmt.Errorf("retry.attempts %d is negative", *r.Attempts)
		}
		rp.NumRetries = wrapperspb.UInt32(uint32(*r.Attempts))
	}
	if r.Backoff != nil {
		d, err := gatewayDuration("retry.backoff", *r.Backoff)
		if err != nil {
			return nil, err
		}
		if d > 0 {
			rp.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(d)}
		}
	}
	return rp, nil
}

// ruleBackendTimeout is HTTPRoute timeouts.backendRequest, -1 when unset
// or for GRPCRoute; 0 disables the timeout. The CRD's validation keeps it
// at most timeouts.request.
func ruleBackendTimeout(rule *model.Rule) (time.Duration, error) {
	if rule.HTTP == nil || rule.HTTP.Timeouts == nil || rule.HTTP.Timeouts.BackendRequest == nil {
		return -1, nil
	}
	return gatewayDuration("timeouts.backendRequest", *rule.HTTP.Timeouts.BackendRequest)
}

// backendShare is one weighted destination of a rule.
type backendShare struct {
	cluster string
	weight  uint32
	extProc *anypb.Any // the pool's ExtProcPerRoute, nil for Services
	// req and resp are the backendRef's header modifiers.
	req, resp headerMods
	// rewrite is the backendRef's URLRewrite filter (HTTPRouteBackendURLRewrite).
	rewrite *gwv1.HTTPURLRewriteFilter
}

// backendCluster is the cluster a resolved backend of a rule (a GRPCRoute
// rule when grpc) sends to, and for a pool its EPP. ok is false for a
// backend that gets HTTP 500: unresolved (Invalid set, or neither Service
// nor Pool), a pool without a usable Endpoint Picker (no
// endpointPickerRef, or port 0), or a Service port or a pool that speaks
// HTTP/1.1 behind a GRPCRoute (gRPC needs HTTP/2, declared or negotiated
// by ALPN, carriesGRPC; the controller reports
// it as ResolvedRefs=False/UnsupportedProtocol and sets Invalid, this is
// the same rule for a model built without it), or a Service port or EPP
// whose client TLS this Gateway cannot have (a DestinationRule
// credentialName CA missing in the Gateway's namespace, tlsReachable):
// plaintext or another trust store would ignore what the TLS asks.
func backendCluster(b *model.Backend, grpc bool, opts Options) (cluster string, epp *model.EPPBackend, ok bool) {
	switch {
	case b.Invalid != "":
		return "", nil, false
	case b.Service != nil:
		if (grpc && !carriesGRPC(b.Service)) || !tlsReachable(b.Service.TLS, opts) {
			return "", nil, false
		}
		return ClusterName(uint32(b.Service.Port), b.Service.Host), nil, true
	case b.Pool != nil:
		p := b.Pool
		if p.EPP == nil || p.EPP.Port == 0 || p.EPP.Host == "" || (grpc && !p.HTTP2()) || !tlsReachable(p.EPP.TLS, opts) {
			return "", nil, false
		}
		return ClusterName(uint32(p.Port), p.Host), p.EPP, true
	}
	return "", nil, false
}

// carriesGRPC reports whether Service port sb can carry gRPC: it declares
// HTTP/2, or negotiates its HTTP version over its client TLS
// (NegotiateHTTP, auto_config; the server must then pick h2).
func carriesGRPC(sb *model.ServiceBackend) bool {
	return sb.HTTP2 || (sb.NegotiateHTTP && sb.TLS != nil)
}

// tlsReachable reports whether the Gateway being translated
// (opts.gatewayNamespace) can verify an upstream with client TLS t: no
// TLS, or TLS whose CA it has (model.UpstreamTLS.CAFor).
func tlsReachable(t *model.UpstreamTLS, opts Options) bool {
	if t == nil {
		return true
	}
	_, ok, _ := t.CAFor(opts.gatewayNamespace)
	return ok
}

// mirrorReachable reports whether rule's mirror to cluster may be sent:
// its Service's TLS (rule.Mirrors) is one this Gateway can have.
func mirrorReachable(rule *model.Rule, cluster string, opts Options) bool {
	sb := rule.Mirrors[cluster]
	return sb == nil || tlsReachable(sb.TLS, opts)
}

// backendAction sends a rule's traffic (a GRPCRoute rule's when grpc) to
// its backends (backendRefs with weight 0 get none):
//
//   - no backend with weight, or every weighted one invalid: nil (the
//     caller answers 500);
//   - one valid backend: RouteAction.cluster, and its share is shares[0],
//     so the caller puts a pool's ExtProcPerRoute in the route's
//     typed_per_filter_config and the backendRef's header filters (and
//     Host) on the route;
//   - otherwise weighted_clusters: each pool's ExtProcPerRoute sits on its
//     own weighted_clusters.clusters[i].typed_per_filter_config, so each
//     pool calls its own EPP with its own failure mode (Istio bug 2), and a
//     Service share never enables ext_proc; invalid shares are merged into
//     one entry for InvalidBackendCluster, a cluster that does not exist,
//     and cluster_not_found_response_code is INTERNAL_SERVER_ERROR, so
//     exactly that share of requests gets 500 (a weighted cluster cannot
//     carry a direct response).
//
// backendRef header modifier filters apply to their share (route level for
// a single backend; a share's Host becomes its entry's host_rewrite_literal
// unless ruleSetsHost); a backendRef's URLRewrite (HTTPRouteBackendURLRewrite)
// rewrites Host as its header Host does, and its path only for a single
// backend (forwardAction; with several, an error: the rule is not served);
// a backendRef with a filter type that is not supported (ExtensionRef,
// ExternalAuth) is an invalid share (500), never one served without it.
// shares holds every valid share, for the caller to check
// what their header modifiers left out.
// grpc: the rule is a GRPCRoute's (a pool that is not h2c cannot serve
// it, see backendCluster).
func backendAction(backends []model.Backend, ruleSetsHost, grpc bool, opts Options) (*routev3.RouteAction, []backendShare, error) {
	var shares []backendShare
	invalidWeight := uint32(0)
	for i := range backends {
		b := &backends[i]
		if b.Weight <= 0 {
			continue
		}
		cluster, epp, ok := backendCluster(b, grpc, opts)
		if !ok {
			invalidWeight += uint32(b.Weight)
			continue
		}
		f := backendFiltersOf(b)
		if f.unsupported != "" {
			// A backendRef filter that cannot be honoured (ExtensionRef,
			// ExternalAuth) must not be skipped: its share answers 500.
			invalidWeight += uint32(b.Weight)
			continue
		}
		s := backendShare{cluster: cluster, weight: uint32(b.Weight),
			req: toHeaderMods(f.reqHeaders, requestHeaders), resp: toHeaderMods(f.respHeaders, responseHeaders), rewrite: f.rewrite}
		if f.rewrite != nil && f.rewrite.Hostname != nil {
			// The backendRef's URLRewrite hostname before its
			// RequestHeaderModifier Host: the rewrite names the upstream host.
			s.req.host = string(*f.rewrite.Hostname)
		}
		if epp != nil && !opts.InferenceEnabled {
			// The controller never resolves a pool with the extension off;
			// a model built without it gets 500, not routing around the EPP.
			invalidWeight += uint32(b.Weight)
			continue
		}
		if epp != nil {
			a, err := toAny(extProcOverride(epp, opts.eppBodyMode))
			if err != nil {
				return nil, nil, err
			}
			s.extProc = a
		}
		shares = append(shares, s)
	}
	if len(shares) == 0 {
		return nil, nil, nil
	}
	if len(shares) == 1 && invalidWeight == 0 {
		ra := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: shares[0].cluster}}
		return ra, shares, nil
	}
	for i, s := range shares {
		if s.rewrite != nil && s.rewrite.Path != nil {
			// A weighted cluster entry can rewrite Host but not the path
			// (WeightedCluster.ClusterWeight has host_rewrite_literal only):
			// refused rather than served with the path unchanged.
			return nil, nil, fmt.Errorf("backendRefs: a URLRewrite of the path on one of %d weighted backends (share %d) cannot be expressed "+
				"(an Envoy weighted cluster entry rewrites Host only): use one backendRef per rule, or the rule's URLRewrite", len(shares), i)
		}
	}
	wc := &routev3.WeightedCluster{}
	for _, s := range shares {
		cw := &routev3.WeightedCluster_ClusterWeight{Name: s.cluster, Weight: wrapperspb.UInt32(s.weight)}
		cw.RequestHeadersToAdd, cw.RequestHeadersToRemove = s.req.add, s.req.remove
		cw.ResponseHeadersToAdd, cw.ResponseHeadersToRemove = s.resp.add, s.resp.remove
		if s.req.host != "" && !ruleSetsHost {
			cw.HostRewriteSpecifier = &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: s.req.host}
		}
		if s.extProc != nil {
			cw.TypedPerFilterConfig = map[string]*anypb.Any{FilterExtProc: s.extProc}
		}
		wc.Clusters = append(wc.Clusters, cw)
	}
	ra := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}}
	if invalidWeight > 0 {
		wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: InvalidBackendCluster, Weight: wrapperspb.UInt32(invalidWeight)})
		ra.ClusterNotFoundResponseCode = routev3.RouteAction_INTERNAL_SERVER_ERROR
	}
	return ra, shares, nil
}
