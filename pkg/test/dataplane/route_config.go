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
