// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// HTTP filter names (HttpFilter.name and typed_per_filter_config keys).
const (
	filterCORS    = "envoy.filters.http.cors"
	filterExtProc = "envoy.filters.http.ext_proc"
	filterRouter  = "envoy.filters.http.router"
)

// defaultRouteTimeout is RouteAction.timeout when unset (Envoy: 15 s);
// an explicit 0 disables the timeout.
const defaultRouteTimeout = 15 * time.Second

// routeTable is a compiled RouteConfiguration.
type routeTable struct {
	name string
	// ignorePort is ignore_port_in_host_matching: the Host's port is left
	// out of virtual host selection only (the header keeps it).
	ignorePort bool
	exact      map[string]*virtualHost
	suffix     []wildcardDomain // "*.example.com", longest suffix first
	prefix     []wildcardDomain // "example.*", longest prefix first
	star       *virtualHost
}

type wildcardDomain struct {
	part string // the domain without its "*"
	vh   *virtualHost
}

type virtualHost struct {
	name   string
	routes []*route
	// perFilter is the virtual host's typed_per_filter_config (ext_proc
	// only), which its routes inherit.
	perFilter perFilterConfig
}

type actionKind int

const (
	actionCluster actionKind = iota
	actionWeighted
	actionRedirect
	actionDirect
)

// route is a compiled envoy.config.route.v3.Route.
type route struct {
	name    string
	match   routeMatch
	kind    actionKind
	cluster string
	// weighted clusters, in order, with their cumulative weight total.
	weighted    []*weightedCluster
	totalWeight uint64
	// clusterNotFound is RouteAction.cluster_not_found_response_code.
	clusterNotFound int
	prefixRewrite   string
	hasPrefixRW     bool
	regexRewrite    *regexRewrite
	hostRewrite     string
	timeout         time.Duration // 0: none
	// maxStreamDuration is RouteAction.max_stream_duration.max_stream_duration
	// (0: none), enforced by the connection manager from the stream's start.
	maxStreamDuration time.Duration
	retry             *retryPolicy
	mirrors           []mirrorPolicy
	redirect          *routev3.RedirectAction
	direct            *directResponse
	reqHeaders        headerMutation
	respHeaders       headerMutation
	perFilter         perFilterConfig
}

// placeholderExtProc stands in for the listener's filter config when a
// per-route ext_proc config is checked on its own (RDS arrives separately
// from LDS). It allows a STREAMED request body (which needs the
// listener's send_body_without_waiting_for_header_response); the pair is
// checked again per request against the real listener config, where a
// mismatch is a 500 and an error log.
var placeholderExtProc = &extprocv3.ExternalProcessor{GrpcService: &corev3.GrpcService{
	TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "placeholder"}},
}, SendBodyWithoutWaitingForHeaderResponse: true}

// perFilterConfig is a typed_per_filter_config map, unpacked: ext_proc
// configs by filter name (a connection manager may carry several ext_proc
// filters: the listeners' pre-routing filters and the EPP's), the CORS
// policy under filterCORS.
type perFilterConfig struct {
	extProc map[string]*extprocv3.ExtProcPerRoute
	cors    *corsv3.CorsPolicy
	// extAuthz are the ExtAuthzPerRoute entries by filter name (route
	// level only: a weighted cluster's is refused).
	extAuthz map[string]*extauthzv3.ExtAuthzPerRoute
}

// has reports whether pf carries config for the HTTP filter named name,
// which enables that filter when it is disabled in the connection manager
// (Envoy's PerFilterConfigs::disabled: any config but a FilterConfig with
// disabled true).
func (pf perFilterConfig) has(name string) bool {
	if name == filterCORS {
		return pf.cors != nil
	}
	return pf.extProc[name] != nil || pf.extAuthz[name] != nil
}

type weightedCluster struct {
	name   string
	weight uint32
	// hostRewrite is ClusterWeight.host_rewrite_literal.
	hostRewrite string
	reqHeaders  headerMutation
	respHeaders headerMutation
	perFilter   perFilterConfig
}

type directResponse struct {
	status int
	body   []byte
}

type regexRewrite struct {
	re    *regexp.Regexp
	subst string // in Go's ${n} syntax
}

type retryPolicy struct {
	numRetries                                 int
	on5xx, onGatewayError, onReset, onConnFail bool
	// onStatusCodes is retriable-status-codes, with statusCodes.
	onStatusCodes bool
	statusCodes   []int
	// perTryTimeout bounds each attempt until its response headers (0:
	// none).
	perTryTimeout time.Duration
	// backOffBase and backOffMax are retry_back_off (Envoy's defaults 25 ms
	// and ten times the base).
	backOffBase, backOffMax time.Duration
}

type mirrorPolicy struct {
	cluster     string
	numerator   uint64
	denominator uint64 // 0: every request
}

type routeMatch struct {
	kind       string // prefix, path, safe_regex, path_separated_prefix
	value      string
	re         *regexp.Regexp
	headers    []headerMatcher
	queryParam []queryMatcher
}

type headerMatcher struct {
	name    string
	present *bool
	sm      *stringMatcher
	invert  bool
}

type queryMatcher struct {
	name    string
	present bool
	sm      *stringMatcher
}

type stringMatcher struct {
	kind       string
	value      string
	ignoreCase bool
	re         *regexp.Regexp
}

// compileRouteTable compiles rc. Any error is a reason to NACK it.
func compileRouteTable(rc *routev3.RouteConfiguration, re regexEngine) (*routeTable, error) {
	t := &routeTable{name: rc.GetName(), exact: map[string]*virtualHost{}, ignorePort: rc.GetIgnorePortInHostMatching()}
	seen := map[string]bool{}
	for vi, v := range rc.GetVirtualHosts() {
		vh := &virtualHost{name: v.GetName()}
		pf, err := compilePerFilter(v.GetTypedPerFilterConfig(), re)
		if err != nil {
			return nil, fmt.Errorf("virtual_hosts[%d] (%s): %w", vi, v.GetName(), err)
		}
		if pf.cors != nil {
			// Not implemented: our translator puts CORS policies on
			// routes only.
			return nil, fmt.Errorf("virtual_hosts[%d] (%s): typed_per_filter_config[%q] on a virtual host not implemented", vi, v.GetName(), filterCORS)
		}
		vh.perFilter = pf
		for ri, r := range v.GetRoutes() {
			cr, err := compileRoute(r, re)
			if err != nil {
				return nil, fmt.Errorf("virtual_hosts[%d] (%s) routes[%d] (%s): %w", vi, v.GetName(), ri, r.GetName(), err)
			}
			vh.routes = append(vh.routes, cr)
		}
		for _, d := range v.GetDomains() {
			d = strings.ToLower(d)
			if seen[d] {
				return nil, fmt.Errorf("domain %q appears in more than one virtual host", d)
			}
			seen[d] = true
			switch {
			case d == "*":
				t.star = vh
			case strings.HasPrefix(d, "*"):
				t.suffix = append(t.suffix, wildcardDomain{part: d[1:], vh: vh})
			case strings.HasSuffix(d, "*"):
				t.prefix = append(t.prefix, wildcardDomain{part: d[:len(d)-1], vh: vh})
			default:
				t.exact[d] = vh
			}
		}
	}
	// Longest wildcard first; equal lengths keep configuration order.
	sort.SliceStable(t.suffix, func(i, j int) bool { return len(t.suffix[i].part) > len(t.suffix[j].part) })
	sort.SliceStable(t.prefix, func(i, j int) bool { return len(t.prefix[i].part) > len(t.prefix[j].part) })
	return t, nil
}

// selectVirtualHost is Envoy's virtual host search for host (already
// lowercased, port stripped): exact domain, then the longest "*suffix",
// then the longest "prefix*", then "*". Wildcards never match the empty
// string.
func (t *routeTable) selectVirtualHost(host string) *virtualHost {
	if t.ignorePort {
		// RouteMatcher::findVirtualHost: the host up to its port's start,
		// numeric or not.
		if i := hostPortStart(host); i >= 0 {
			host = host[:i]
		}
	}
	if vh := t.exact[host]; vh != nil {
		return vh
	}
	for _, w := range t.suffix {
		if len(host) > len(w.part) && strings.HasSuffix(host, w.part) {
			return w.vh
		}
	}
	for _, w := range t.prefix {
		if len(host) > len(w.part) && strings.HasPrefix(host, w.part) {
			return w.vh
		}
	}
	return t.star
}

// matchRoute is RouteMatcher::route: the virtual host by :authority, then
// its first route whose match accepts the request (vh or r nil when none).
// The Host is taken as it is now: the connection manager already stripped
// its port when strip_any_host_port is set (stripHostPort), and the route
// table leaves the port out of the match when it sets
// ignore_port_in_host_matching (selectVirtualHost).
func (t *routeTable) matchRoute(req *extproc.Request) (*virtualHost, *route) {
	vh := t.selectVirtualHost(strings.ToLower(req.Authority))
	if vh == nil {
		return nil, nil
	}
	return vh, vh.selectRoute(req)
}

// selectRoute returns the first route of vh whose match accepts the
// request, or nil.
func (vh *virtualHost) selectRoute(req *extproc.Request) *route {
	for _, r := range vh.routes {
		if r.match.matches(req) {
			return r
		}
	}
	return nil
}

func compileRoute(r *routev3.Route, re regexEngine) (*route, error) {
	cr := &route{name: r.GetName()}
	m, err := compileMatch(r.GetMatch(), re)
	if err != nil {
		return nil, fmt.Errorf("match: %w", err)
	}
	cr.match = m
	if cr.reqHeaders, err = compileHeaderMutation(r.GetRequestHeadersToAdd(), r.GetRequestHeadersToRemove()); err != nil {
		return nil, err
	}
	if cr.respHeaders, err = compileHeaderMutation(r.GetResponseHeadersToAdd(), r.GetResponseHeadersToRemove()); err != nil {
		return nil, err
	}
	if cr.perFilter, err = compilePerFilter(r.GetTypedPerFilterConfig(), re); err != nil {
		return nil, err
	}
	switch a := r.GetAction().(type) {
	case *routev3.Route_Route:
		if err := compileRouteAction(cr, a.Route, cr.match, re); err != nil {
			return nil, err
		}
	case *routev3.Route_Redirect:
		cr.kind, cr.redirect = actionRedirect, a.Redirect
		if rr := a.Redirect.GetRegexRewrite(); rr != nil {
			if _, err := compileRegexRewrite(rr, re); err != nil {
				return nil, err
			}
		}
		if a.Redirect.GetPrefixRewrite() != "" && m.kind == "safe_regex" {
			return nil, errors.New("redirect prefix_rewrite needs a prefix or path match")
		}
	case *routev3.Route_DirectResponse:
		cr.kind = actionDirect
		body, err := dataSourceBytes(a.DirectResponse.GetBody())
		if err != nil {
			return nil, err
		}
		cr.direct = &directResponse{status: int(a.DirectResponse.GetStatus()), body: body}
	default:
		return nil, fmt.Errorf("route action %T not implemented", a)
	}
	return cr, nil
}

func compileRouteAction(cr *route, ra *routev3.RouteAction, m routeMatch, re regexEngine) error {
	switch c := ra.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		cr.kind, cr.cluster = actionCluster, c.Cluster
	case *routev3.RouteAction_WeightedClusters:
		cr.kind = actionWeighted
		for i, cw := range c.WeightedClusters.GetClusters() {
			wc := &weightedCluster{name: cw.GetName(), weight: cw.GetWeight().GetValue(), hostRewrite: cw.GetHostRewriteLiteral()}
			var err error
			if wc.reqHeaders, err = compileHeaderMutation(cw.GetRequestHeadersToAdd(), cw.GetRequestHeadersToRemove()); err != nil {
				return fmt.Errorf("weighted_clusters[%d]: %w", i, err)
			}
			if wc.respHeaders, err = compileHeaderMutation(cw.GetResponseHeadersToAdd(), cw.GetResponseHeadersToRemove()); err != nil {
				return fmt.Errorf("weighted_clusters[%d]: %w", i, err)
			}
			if wc.perFilter, err = compilePerFilter(cw.GetTypedPerFilterConfig(), re); err != nil {
				return fmt.Errorf("weighted_clusters[%d]: %w", i, err)
			}
			if len(wc.perFilter.extAuthz) > 0 {
				return fmt.Errorf("weighted_clusters[%d]: ext_authz per-filter config on a weighted cluster not implemented", i)
			}
			cr.totalWeight += uint64(wc.weight)
			cr.weighted = append(cr.weighted, wc)
		}
		if cr.totalWeight == 0 {
			return errors.New("weighted_clusters: total weight is 0")
		}
	default:
		return fmt.Errorf("cluster specifier %T not implemented", c)
	}
	switch ra.GetClusterNotFoundResponseCode() {
	case routev3.RouteAction_SERVICE_UNAVAILABLE:
		cr.clusterNotFound = http.StatusServiceUnavailable
	case routev3.RouteAction_NOT_FOUND:
		cr.clusterNotFound = http.StatusNotFound
	case routev3.RouteAction_INTERNAL_SERVER_ERROR:
		cr.clusterNotFound = http.StatusInternalServerError
	default:
		return fmt.Errorf("cluster_not_found_response_code %v not implemented", ra.GetClusterNotFoundResponseCode())
	}
	if p := ra.GetPrefixRewrite(); p != "" {
		if m.kind == "safe_regex" {
			return errors.New("prefix_rewrite needs a prefix, path or path_separated_prefix match")
		}
		cr.prefixRewrite, cr.hasPrefixRW = p, true
	}
	if rr := ra.GetRegexRewrite(); rr != nil {
		r, err := compileRegexRewrite(rr, re)
		if err != nil {
			return err
		}
		cr.regexRewrite = r
	}
	cr.hostRewrite = ra.GetHostRewriteLiteral()
	cr.timeout = defaultRouteTimeout
	if ra.Timeout != nil {
		cr.timeout = ra.Timeout.AsDuration()
	}
	if msd := ra.GetMaxStreamDuration(); msd != nil {
		// Envoy's "new timeouts": with max_stream_duration present the router
		// ignores RouteAction.timeout (RouteEntryImplBase using_new_timeouts_).
		cr.timeout = 0
		cr.maxStreamDuration = msd.GetMaxStreamDuration().AsDuration()
	}
	if rp := ra.GetRetryPolicy(); rp != nil {
		p := &retryPolicy{numRetries: 1}
		if rp.NumRetries != nil {
			p.numRetries = int(rp.GetNumRetries().GetValue())
		}
		for _, on := range strings.Split(rp.GetRetryOn(), ",") {
			switch strings.TrimSpace(on) {
			case "5xx":
				p.on5xx = true
			case "gateway-error":
				p.onGatewayError = true
			case "reset":
				p.onReset = true
			case "connect-failure":
				p.onConnFail = true
			case "retriable-status-codes":
				p.onStatusCodes = true
			case "":
			default:
				return fmt.Errorf("retry_policy.retry_on %q not implemented", on)
			}
		}
		for _, c := range rp.GetRetriableStatusCodes() {
			p.statusCodes = append(p.statusCodes, int(c))
		}
		p.perTryTimeout = rp.GetPerTryTimeout().AsDuration()
		// RetryPolicy.retry_back_off: base_interval (default 25 ms),
		// max_interval (default ten times the base, and not below it:
		// Envoy rejects max_interval < base_interval).
		p.backOffBase = 25 * time.Millisecond
		if b := rp.GetRetryBackOff(); b != nil {
			if b.GetBaseInterval().AsDuration() <= 0 {
				return fmt.Errorf("retry_policy.retry_back_off.base_interval must be greater than 0")
			}
			p.backOffBase = b.GetBaseInterval().AsDuration()
			if b.MaxInterval != nil && b.GetMaxInterval().AsDuration() < p.backOffBase {
				return fmt.Errorf("retry_policy.retry_back_off.max_interval must be greater than or equal to the base_interval")
			}
		}
		p.backOffMax = 10 * p.backOffBase
		if m := rp.GetRetryBackOff().GetMaxInterval(); m != nil {
			p.backOffMax = m.AsDuration()
		}
		cr.retry = p
	}
	for _, mp := range ra.GetRequestMirrorPolicies() {
		p := mirrorPolicy{cluster: mp.GetCluster()}
		if f := mp.GetRuntimeFraction().GetDefaultValue(); f != nil {
			p.numerator = uint64(f.GetNumerator())
			switch f.GetDenominator() {
			case typev3.FractionalPercent_HUNDRED:
				p.denominator = 100
			case typev3.FractionalPercent_TEN_THOUSAND:
				p.denominator = 10_000
			case typev3.FractionalPercent_MILLION:
				p.denominator = 1_000_000
			}
		}
		cr.mirrors = append(cr.mirrors, p)
	}
	return nil
}

// weightedAt is WeightedClusterSpecifierPlugin's pickClusterIndex
// (source/common/router/weighted_cluster_specifier.cc): the entry whose
// range of the cumulative weights, in configuration order, holds v modulo
// the total weight.
func (r *route) weightedAt(v uint64) *weightedCluster {
	v %= r.totalWeight
	for _, wc := range r.weighted {
		if v < uint64(wc.weight) {
			return wc
		}
		v -= uint64(wc.weight)
	}
	return r.weighted[len(r.weighted)-1]
}

func compileRegexRewrite(rr *matcherv3.RegexMatchAndSubstitute, eng regexEngine) (*regexRewrite, error) {
	re, err := eng.compile(rr.GetPattern().GetRegex(), false)
	if err != nil {
		return nil, fmt.Errorf("regex_rewrite: %w", err)
	}
	// Envoy (RE2) writes groups as \1; Go as ${1}.
	subst := regexp.MustCompile(`\\(\d)`).ReplaceAllString(strings.ReplaceAll(rr.GetSubstitution(), "$", "$$"), "$${$1}")
	return &regexRewrite{re: re, subst: subst}, nil
}

// compilePerFilter unpacks typed_per_filter_config. Only the filters this
// data plane runs may have per-route configuration.
func compilePerFilter(m map[string]*anypb.Any, re regexEngine) (perFilterConfig, error) {
	var pf perFilterConfig
	for name, a := range m {
		msg, err := a.UnmarshalNew()
		if err != nil {
			return pf, fmt.Errorf("typed_per_filter_config[%q]: %w", name, err)
		}
		switch c := msg.(type) {
		case *extprocv3.ExtProcPerRoute:
			// Any name: it is matched against the connection manager's
			// ext_proc filters when a request runs (an unknown name
			// configures nothing, as in Envoy). Field errors surface now
			// (NACK), not per request.
			if _, _, err := extproc.Effective(placeholderExtProc, true, c); err != nil {
				return pf, fmt.Errorf("typed_per_filter_config[%q]: %w", name, err)
			}
			if pf.extProc == nil {
				pf.extProc = map[string]*extprocv3.ExtProcPerRoute{}
			}
			pf.extProc[name] = c
		case *corsv3.CorsPolicy:
			if name != filterCORS {
				return pf, fmt.Errorf("typed_per_filter_config[%q]: CorsPolicy under another filter's name", name)
			}
			for _, sm := range c.GetAllowOriginStringMatch() {
				if _, err := compileStringMatcher(sm, re); err != nil {
					return pf, err
				}
			}
			pf.cors = c
		case *extauthzv3.ExtAuthzPerRoute:
			if !extAuthzFilterName(name) {
				return pf, fmt.Errorf("typed_per_filter_config[%q]: ExtAuthzPerRoute under another filter's name", name)
			}
			if err := checkExtAuthzPerRoute(c); err != nil {
				return pf, fmt.Errorf("typed_per_filter_config[%q]: %w", name, err)
			}
			if pf.extAuthz == nil {
				pf.extAuthz = map[string]*extauthzv3.ExtAuthzPerRoute{}
			}
			pf.extAuthz[name] = c
		default:
			return pf, fmt.Errorf("typed_per_filter_config[%q]: %T not implemented", name, msg)
		}
	}
	return pf, nil
}

func compileMatch(m *routev3.RouteMatch, eng regexEngine) (routeMatch, error) {
	var rm routeMatch
	switch p := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		rm.kind, rm.value = "prefix", p.Prefix
	case *routev3.RouteMatch_Path:
		rm.kind, rm.value = "path", p.Path
	case *routev3.RouteMatch_PathSeparatedPrefix:
		rm.kind, rm.value = "path_separated_prefix", p.PathSeparatedPrefix
	case *routev3.RouteMatch_SafeRegex:
		re, err := eng.compile(p.SafeRegex.GetRegex(), true)
		if err != nil {
			return rm, err
		}
		rm.kind, rm.re = "safe_regex", re
	default:
		return rm, fmt.Errorf("path specifier %T not implemented", p)
	}
	for _, h := range m.GetHeaders() {
		hm := headerMatcher{name: strings.ToLower(h.GetName()), invert: h.GetInvertMatch()}
		switch s := h.GetHeaderMatchSpecifier().(type) {
		case *routev3.HeaderMatcher_StringMatch:
			sm, err := compileStringMatcher(s.StringMatch, eng)
			if err != nil {
				return rm, err
			}
			hm.sm = sm
		case *routev3.HeaderMatcher_PresentMatch:
			v := s.PresentMatch
			hm.present = &v
		case nil:
			// No specifier is a presence match
			// (HeaderUtility::createHeaderData,
			// HEADER_MATCH_SPECIFIER_NOT_SET: HeaderDataPresentMatch with
			// present true).
			v := true
			hm.present = &v
		default:
			return rm, fmt.Errorf("header matcher %T not implemented", s)
		}
		rm.headers = append(rm.headers, hm)
	}
	for _, q := range m.GetQueryParameters() {
		qm := queryMatcher{name: q.GetName()}
		switch s := q.GetQueryParameterMatchSpecifier().(type) {
		case *routev3.QueryParameterMatcher_StringMatch:
			sm, err := compileStringMatcher(s.StringMatch, eng)
			if err != nil {
				return rm, err
			}
			qm.sm = sm
		case *routev3.QueryParameterMatcher_PresentMatch:
			qm.present = s.PresentMatch
		default:
			return rm, fmt.Errorf("query parameter matcher %T not implemented", s)
		}
		rm.queryParam = append(rm.queryParam, qm)
	}
	return rm, nil
}

func compileStringMatcher(m *matcherv3.StringMatcher, eng regexEngine) (*stringMatcher, error) {
	sm := &stringMatcher{ignoreCase: m.GetIgnoreCase()}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		sm.kind, sm.value = "exact", p.Exact
	case *matcherv3.StringMatcher_Prefix:
		sm.kind, sm.value = "prefix", p.Prefix
	case *matcherv3.StringMatcher_Suffix:
		sm.kind, sm.value = "suffix", p.Suffix
	case *matcherv3.StringMatcher_Contains:
		sm.kind, sm.value = "contains", p.Contains
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := eng.compile(p.SafeRegex.GetRegex(), true)
		if err != nil {
			return nil, err
		}
		sm.kind, sm.re = "safe_regex", re
	default:
		return nil, fmt.Errorf("string matcher %T not implemented", p)
	}
	if sm.ignoreCase {
		sm.value = strings.ToLower(sm.value)
	}
	return sm, nil
}

func (sm *stringMatcher) matches(v string) bool {
	if sm.kind == "safe_regex" {
		return sm.re.MatchString(v) // ignore_case does not apply to regexes
	}
	if sm.ignoreCase {
		v = strings.ToLower(v)
	}
	switch sm.kind {
	case "exact":
		return v == sm.value
	case "prefix":
		return strings.HasPrefix(v, sm.value)
	case "suffix":
		return strings.HasSuffix(v, sm.value)
	default:
		return strings.Contains(v, sm.value)
	}
}

// matches applies the path matcher to the path without its query, then
// the header matchers (on the values requestHeader gives, each on its
// own), then the query parameter matchers (the first value of a
// parameter, raw: queryParams).
func (m *routeMatch) matches(req *extproc.Request) bool {
	path, query, _ := strings.Cut(req.Path, "?")
	if i := strings.IndexByte(path, '#'); i >= 0 {
		path = path[:i]
	}
	switch m.kind {
	case "prefix":
		if !strings.HasPrefix(path, m.value) {
			return false
		}
	case "path":
		if path != m.value {
			return false
		}
	case "path_separated_prefix":
		if path != m.value && !strings.HasPrefix(path, m.value+"/") {
			return false
		}
	case "safe_regex":
		if !m.re.MatchString(path) {
			return false
		}
	}
	for _, hm := range m.headers {
		if !hm.matches(requestHeader(req, hm.name)) {
			return false
		}
	}
	if len(m.queryParam) > 0 {
		q := queryParams(query)
		for _, qm := range m.queryParam {
			v, ok := q[qm.name]
			switch {
			case qm.sm == nil:
				if ok != qm.present {
					return false
				}
			case !ok || !qm.sm.matches(v):
				return false
			}
		}
	}
	return true
}

// queryParams is Http::Utility::QueryParamsMulti::parseQueryString as the
// route matcher uses it (RouteMatchContext::queryParams in
// source/common/router/config_impl.h; parseParameters with decode_params
// false, source/common/http/utility.cc): parameters split on '&' only, the
// name ending at the first '=' (without one the value is empty), names and
// values kept as the request wrote them, never percent-decoded, nor '+'
// turned into a space; only a name's first value is kept
// (QueryParameterMatcher::matches reads getFirstValue,
// source/common/router/config_utility.cc).
func queryParams(query string) map[string]string {
	q := map[string]string{}
	if query == "" {
		return q
	}
	for _, p := range strings.Split(query, "&") {
		name, value, _ := strings.Cut(p, "=")
		if _, seen := q[name]; !seen {
			q[name] = value
		}
	}
	return q
}

// requestHeader is the values of header name (lower case) in Envoy's
// request header map, which holds the pseudo-headers :authority, :path
// (with the query), :method and :scheme beside the others, so a header
// matcher reads them as it reads any header (HeaderUtility's HeaderData
// matchers look the name up in the request's HeaderMap,
// source/common/http/header_utility.h; the pseudo-headers are inline
// headers of RequestHeaderMapImpl, source/common/http/header_map_impl.h).
// No other ':'-prefixed name is in the map, and neither is "host": the
// Host header is :authority there (as in Go, whose server moves it to
// Request.Host).
func requestHeader(req *extproc.Request, name string) []string {
	var v string
	switch name {
	case ":authority":
		v = req.Authority
	case ":path":
		v = req.Path
	case ":method":
		v = req.Method
	case ":scheme":
		v = req.Scheme
	default:
		if strings.HasPrefix(name, ":") {
			return nil
		}
		return req.Headers.Values(name)
	}
	if v == "" {
		return nil
	}
	return []string{v}
}

// matches is HeaderUtility::matchHeaders for one matcher with
// envoy.reloadable_features.match_headers_individually on, its default
// (source/common/runtime/runtime_features.cc; the fix of CVE-2026-26308):
// a presence matcher asks whether the header is there
// (HeaderDataPresentMatch); a value matcher fails on a missing header,
// inverted or not, and otherwise tries each value on its own
// (HeaderDataBaseImpl::matchesHeadersIndividually,
// source/common/http/header_utility.h): it matches when some value
// matches, and, inverted, when none does. Values are never joined.
func (hm headerMatcher) matches(vals []string) bool {
	if hm.present != nil {
		return (len(vals) > 0) == *hm.present != hm.invert
	}
	if len(vals) == 0 {
		return false
	}
	for _, v := range vals {
		if hm.sm.matches(v) {
			return !hm.invert
		}
	}
	return hm.invert
}

func dataSourceBytes(d *corev3.DataSource) ([]byte, error) {
	switch s := d.GetSpecifier().(type) {
	case nil:
		return nil, nil
	case *corev3.DataSource_InlineString:
		return []byte(s.InlineString), nil
	case *corev3.DataSource_InlineBytes:
		return s.InlineBytes, nil
	case *corev3.DataSource_Filename:
		return readFile(s.Filename)
	default:
		return nil, fmt.Errorf("data source %T not implemented", s)
	}
}
