// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ruleFilters is a rule's (or backendRef's) filters, HTTPRoute and GRPCRoute
// alike, sorted by what they turn into.
type ruleFilters struct {
	reqHeaders  []*gwv1.HTTPHeaderFilter
	respHeaders []*gwv1.HTTPHeaderFilter
	redirect    *gwv1.HTTPRequestRedirectFilter
	rewrite     *gwv1.HTTPURLRewriteFilter
	mirrors     []*gwv1.HTTPRequestMirrorFilter
	cors        *gwv1.HTTPCORSFilter
	// unsupported names the first filter we cannot implement
	// (ExtensionRef, a backendRef's ExternalAuth, unknown types). The Gateway API says such
	// a filter must not be skipped: the rule answers 500 instead.
	unsupported string
}

func httpFilters(fs []gwv1.HTTPRouteFilter, rule bool) ruleFilters {
	var r ruleFilters
	for i := range fs {
		f := &fs[i]
		switch {
		case f.Type == gwv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil:
			r.reqHeaders = append(r.reqHeaders, f.RequestHeaderModifier)
		case f.Type == gwv1.HTTPRouteFilterResponseHeaderModifier && f.ResponseHeaderModifier != nil:
			r.respHeaders = append(r.respHeaders, f.ResponseHeaderModifier)
		case f.Type == gwv1.HTTPRouteFilterRequestRedirect && f.RequestRedirect != nil:
			r.redirect = f.RequestRedirect
		case f.Type == gwv1.HTTPRouteFilterURLRewrite && f.URLRewrite != nil:
			r.rewrite = f.URLRewrite
		case f.Type == gwv1.HTTPRouteFilterRequestMirror && f.RequestMirror != nil:
			r.mirrors = append(r.mirrors, f.RequestMirror)
		case f.Type == gwv1.HTTPRouteFilterCORS && f.CORS != nil:
			r.cors = f.CORS
		case f.Type == gwv1.HTTPRouteFilterExternalAuth && f.ExternalAuth != nil && rule:
			// A rule's ExternalAuth is resolved into model.Rule.ExternalAuth
			// (enableExtAuthz); a backendRef's is not supported.
		default:
			if r.unsupported == "" {
				r.unsupported = string(f.Type)
			}
		}
	}
	return r
}

func grpcFilters(fs []gwv1.GRPCRouteFilter) ruleFilters {
	var r ruleFilters
	for i := range fs {
		f := &fs[i]
		switch {
		case f.Type == gwv1.GRPCRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil:
			r.reqHeaders = append(r.reqHeaders, f.RequestHeaderModifier)
		case f.Type == gwv1.GRPCRouteFilterResponseHeaderModifier && f.ResponseHeaderModifier != nil:
			r.respHeaders = append(r.respHeaders, f.ResponseHeaderModifier)
		case f.Type == gwv1.GRPCRouteFilterRequestMirror && f.RequestMirror != nil:
			r.mirrors = append(r.mirrors, f.RequestMirror)
		default:
			if r.unsupported == "" {
				r.unsupported = string(f.Type)
			}
		}
	}
	return r
}

// redirectAction is RequestRedirect (Route.redirect): scheme →
// scheme_redirect, hostname → host_redirect, port → port_redirect, path
// ReplaceFullPath → path_redirect, ReplacePrefixMatch → prefix_rewrite (a
// regex_rewrite when the replacement is "/", so "/prefix/x" becomes "/x"
// and not "//x"), statusCode → response_code (302 by default).
//
// Port, as the Gateway API defines it: without port and scheme, the
// listener's port; without port but with a scheme, that scheme's well-known
// port; a well-known port for the resulting scheme is left out of Location
// where Envoy lets us (see below).
func redirectAction(f *gwv1.HTTPRequestRedirectFilter, prefix string, listenerPort uint32, listenerTLS bool) (*routev3.RedirectAction, error) {
	ra := &routev3.RedirectAction{}
	scheme := "http"
	if listenerTLS {
		scheme = "https"
	}
	if f.Scheme != nil {
		scheme = *f.Scheme
		ra.SchemeRewriteSpecifier = &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: scheme}
	}
	if f.Hostname != nil {
		ra.HostRedirect = string(*f.Hostname)
	}
	var port uint32
	switch {
	case f.Port != nil:
		port = uint32(*f.Port)
	case f.Scheme == nil:
		port = listenerPort
	case scheme == "https":
		port = 443
	default:
		port = 80
	}
	// Envoy writes port_redirect as given (":80" included) and, without
	// host_redirect, keeps the request's Host port unless port_redirect is
	// set or the scheme changes from a default port (Http::Utility::newUri,
	// processRequestHost). A well-known port is left out of Location where
	// the request's port cannot show through: with a hostname
	// (host_redirect replaces the whole Host), or on a listener at its
	// scheme's default port (80 for HTTP, 443 for HTTPS: a request there
	// carries that port or none). On another listener port it is written,
	// even 80 or 443, rather than send the client to the request's port.
	wellKnown := (scheme == "http" && port == 80) || (scheme == "https" && port == 443)
	listenerDefault := (!listenerTLS && listenerPort == 80) || (listenerTLS && listenerPort == 443)
	if !wellKnown || (f.Hostname == nil && !listenerDefault) {
		ra.PortRedirect = port
	}
	if p := f.Path; p != nil {
		switch p.Type {
		case gwv1.FullPathHTTPPathModifier:
			ra.PathRewriteSpecifier = &routev3.RedirectAction_PathRedirect{PathRedirect: deref(p.ReplaceFullPath)}
		case gwv1.PrefixMatchHTTPPathModifier:
			if prefix == "" {
				return nil, fmt.Errorf("ReplacePrefixMatch needs a PathPrefix match")
			}
			repl := normalizeReplacement(deref(p.ReplacePrefixMatch))
			if rr := prefixRegexRewrite(prefix, repl); rr != nil {
				ra.PathRewriteSpecifier = &routev3.RedirectAction_RegexRewrite{RegexRewrite: rr}
			} else if !(prefix == "/" && repl == "/") {
				ra.PathRewriteSpecifier = &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: repl}
			}
		default:
			return nil, fmt.Errorf("unsupported redirect path modifier %q", p.Type)
		}
	}
	code := 302
	if f.StatusCode != nil {
		code = *f.StatusCode
	}
	switch code {
	case 301:
		ra.ResponseCode = routev3.RedirectAction_MOVED_PERMANENTLY
	case 302:
		ra.ResponseCode = routev3.RedirectAction_FOUND
	case 303:
		ra.ResponseCode = routev3.RedirectAction_SEE_OTHER
	case 307:
		ra.ResponseCode = routev3.RedirectAction_TEMPORARY_REDIRECT
	case 308:
		ra.ResponseCode = routev3.RedirectAction_PERMANENT_REDIRECT
	default:
		return nil, fmt.Errorf("unsupported redirect status code %d", code)
	}
	return ra, nil
}

// prefixRegexRewrite handles the replacements a plain prefix_rewrite gets
// wrong: replacing prefix "/" (the whole path is the "rest"), and replacing
// a prefix with "/" (which would leave "//rest"). nil means prefix_rewrite
// does the job.
func prefixRegexRewrite(prefix, repl string) *matcherv3.RegexMatchAndSubstitute {
	switch {
	case repl == "/":
		if prefix == "/" {
			return nil // "/" → "/" is the identity
		}
		return &matcherv3.RegexMatchAndSubstitute{
			Pattern:      &matcherv3.RegexMatcher{Regex: "^" + regexp.QuoteMeta(prefix) + "/*"},
			Substitution: "/",
		}
	case prefix == "/":
		return &matcherv3.RegexMatchAndSubstitute{
			Pattern:      &matcherv3.RegexMatcher{Regex: "^/"},
			Substitution: strings.TrimRight(repl, "/") + "/",
		}
	}
	return nil
}

// normalizeReplacement drops trailing slashes from a ReplacePrefixMatch
// value (the matched prefix has none either, so "/foo/x" with "/bar/"
// becomes "/bar/x", not "/bar//x"); "" and "/" both mean "/".
func normalizeReplacement(repl string) string {
	repl = strings.TrimRight(repl, "/")
	if repl == "" {
		return "/"
	}
	return repl
}

// applyRewrite is URLRewrite on a RouteAction: hostname →
// host_rewrite_literal; ReplaceFullPath → regex_rewrite of the whole path
// (the query string is kept); ReplacePrefixMatch → prefix_rewrite, or the
// regex forms of prefixRegexRewrite.
func applyRewrite(ra *routev3.RouteAction, f *gwv1.HTTPURLRewriteFilter, prefix string) error {
	if f.Hostname != nil {
		ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: string(*f.Hostname)}
	}
	if p := f.Path; p != nil {
		switch p.Type {
		case gwv1.FullPathHTTPPathModifier:
			ra.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{
				Pattern:      &matcherv3.RegexMatcher{Regex: "^/.*$"},
				Substitution: deref(p.ReplaceFullPath),
			}
		case gwv1.PrefixMatchHTTPPathModifier:
			if prefix == "" {
				return fmt.Errorf("ReplacePrefixMatch needs a PathPrefix match")
			}
			repl := normalizeReplacement(deref(p.ReplacePrefixMatch))
			if rr := prefixRegexRewrite(prefix, repl); rr != nil {
				ra.RegexRewrite = rr
			} else if !(prefix == "/" && repl == "/") {
				ra.PrefixRewrite = repl
			}
		default:
			return fmt.Errorf("unsupported rewrite path modifier %q", p.Type)
		}
	}
	return nil
}

// mirrorService resolves a RequestMirror backendRef to a Service cluster.
// Only core Services with a port are supported. ReferenceGrant checks for
// cross-namespace mirrors are the controller's job: it must drop mirrors it
// does not permit before the model reaches us.
func mirrorService(ref gwv1.BackendObjectReference, routeNS, domain string) (string, error) {
	if g := deref(ref.Group); g != "" && g != "core" {
		return "", fmt.Errorf("mirror backendRef group %q not supported", g)
	}
	if k := deref(ref.Kind); k != "" && k != "Service" {
		return "", fmt.Errorf("mirror backendRef kind %q not supported", k)
	}
	if ref.Port == nil {
		return "", fmt.Errorf("mirror backendRef %s needs a port", ref.Name)
	}
	ns := routeNS
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	host := string(ref.Name) + "." + ns + ".svc." + domain
	return ClusterName(uint32(*ref.Port), host), nil
}

// mirrorPolicy is RequestMirror (RouteAction.request_mirror_policies):
// percent → runtime_fraction out of a HUNDRED, fraction → out of a MILLION;
// neither → every request.
func mirrorPolicy(f *gwv1.HTTPRequestMirrorFilter, cluster string) *routev3.RouteAction_RequestMirrorPolicy {
	p := &routev3.RouteAction_RequestMirrorPolicy{Cluster: cluster}
	switch {
	case f.Percent != nil:
		p.RuntimeFraction = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{
			Numerator: uint32(*f.Percent), Denominator: typev3.FractionalPercent_HUNDRED,
		}}
	case f.Fraction != nil && f.Fraction.Denominator != nil && *f.Fraction.Denominator > 0:
		n := uint64(f.Fraction.Numerator) * 1_000_000 / uint64(*f.Fraction.Denominator)
		p.RuntimeFraction = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{
			Numerator: uint32(n), Denominator: typev3.FractionalPercent_MILLION,
		}}
	case f.Fraction != nil:
		p.RuntimeFraction = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{
			Numerator: uint32(f.Fraction.Numerator), Denominator: typev3.FractionalPercent_HUNDRED,
		}}
	}
	return p
}

// corsPolicy is the Gateway API HTTPCORSFilter as the CORS filter's
// per-route envoy.extensions.filters.http.cors.v3.CorsPolicy:
// allowOrigins → allow_origin_string_match ("*" any origin, a "*" inside an
// origin any run of characters, else exact), allowMethods / allowHeaders /
// exposeHeaders → comma lists ("*" as given), maxAge → max_age in seconds,
// allowCredentials → allow_credentials; forward_not_matching_preflights
// false, so the CORS filter answers a preflight from an origin the filter
// does not allow itself (200 without access-control-allow-origin) instead of
// forwarding it to the backend, Envoy's default: the Gateway API's
// HTTPRouteCORS expects the gateway, not the backend, to answer it.
func corsPolicy(f *gwv1.HTTPCORSFilter) *corsv3.CorsPolicy {
	p := &corsv3.CorsPolicy{ForwardNotMatchingPreflights: wrapperspb.Bool(false)}
	for _, o := range f.AllowOrigins {
		s := string(o)
		switch {
		case s == "*":
			p.AllowOriginStringMatch = append(p.AllowOriginStringMatch, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: ".*"}}})
		case strings.Contains(s, "*"):
			re := "^" + strings.ReplaceAll(regexp.QuoteMeta(s), `\*`, ".*") + "$"
			p.AllowOriginStringMatch = append(p.AllowOriginStringMatch, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}})
		default:
			p.AllowOriginStringMatch = append(p.AllowOriginStringMatch, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}})
		}
	}
	p.AllowMethods = joinStrings(f.AllowMethods)
	p.AllowHeaders = joinStrings(f.AllowHeaders)
	p.ExposeHeaders = joinStrings(f.ExposeHeaders)
	if f.MaxAge > 0 {
		p.MaxAge = strconv.Itoa(int(f.MaxAge))
	}
	if f.AllowCredentials != nil {
		p.AllowCredentials = wrapperspb.Bool(*f.AllowCredentials)
	}
	return p
}

func joinStrings[T ~string](v []T) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = string(x)
	}
	return strings.Join(s, ",")
}
