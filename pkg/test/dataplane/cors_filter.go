// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/http"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// corsState is one request's CORS filter, split as Envoy's CorsFilter is
// (source/extensions/filters/http/cors/cors_filter.cc): decode latches the
// origin and may answer a preflight; encode adds the headers to the
// response. The zero value is a filter whose decodeHeaders never ran
// (is_cors_request_ false): its encode does nothing.
type corsState struct {
	policy      *corsv3.CorsPolicy
	corsRequest bool   // is_cors_request_
	origin      string // latched_origin_ ("" when not allowed)
}

// corsDecode is CorsFilter::decodeHeaders with the route's CorsPolicy (nil:
// the filter does nothing). A request without Origin (or an empty one)
// continues untouched. With an Origin it is a CORS request; when the origin
// matches allow_origin_string_match it is latched for encode. A preflight
// (OPTIONS with a non-empty Access-Control-Request-Method) from an allowed
// origin, or from any origin when forward_not_matching_preflights is false,
// gets the returned local reply: 200, headers only (end_stream true), with
// access-control-allow-origin (the allowed origin only), -allow-credentials,
// -allow-methods and -allow-headers ("*" echoes the request's
// Access-Control-Request-Method / -Headers, as Envoy does) and -max-age as
// configured. A preflight from another origin continues (Envoy's default
// forward_not_matching_preflights true).
func corsDecode(p *corsv3.CorsPolicy, req *extproc.Request) (corsState, *extproc.Response) {
	st := corsState{policy: p}
	if p == nil {
		return st, nil
	}
	origin := req.Headers.Get("origin")
	if origin == "" {
		return st, nil
	}
	allowed := originAllowed(p, origin)
	if allowed {
		st.origin = origin
	}
	st.corsRequest = true
	acrm := req.Headers.Get("access-control-request-method")
	if req.Method != http.MethodOptions || acrm == "" {
		return st, nil
	}
	if !allowed && forwardNotMatchingPreflights(p) {
		return st, nil
	}
	h := http.Header{}
	if allowed {
		h.Set("access-control-allow-origin", origin)
	}
	if p.GetAllowCredentials().GetValue() {
		h.Set("access-control-allow-credentials", "true")
	}
	switch v := p.GetAllowMethods(); v {
	case "":
	case "*":
		h.Set("access-control-allow-methods", acrm)
	default:
		h.Set("access-control-allow-methods", v)
	}
	switch v := p.GetAllowHeaders(); v {
	case "":
	case "*":
		h.Set("access-control-allow-headers", req.Headers.Get("access-control-request-headers"))
	default:
		h.Set("access-control-allow-headers", v)
	}
	if v := p.GetMaxAge(); v != "" {
		h.Set("access-control-max-age", v)
	}
	// decoder_callbacks_->encodeHeaders(headers, end_stream=true,
	// "cors_response"): no body, so an encoder filter sees end_of_stream.
	return st, &extproc.Response{Status: http.StatusOK, Headers: h, Body: http.NoBody, Trailers: http.Header{}, Details: "cors_response"}
}

// encode is CorsFilter::encodeHeaders: for a CORS request from an allowed
// origin it sets access-control-allow-origin, -allow-credentials (when
// true) and -expose-headers (when configured) on the response.
func (st corsState) encode(h http.Header) {
	if !st.corsRequest || st.origin == "" {
		return
	}
	h.Set("access-control-allow-origin", st.origin)
	if st.policy.GetAllowCredentials().GetValue() {
		h.Set("access-control-allow-credentials", "true")
	}
	if v := st.policy.GetExposeHeaders(); v != "" {
		h.Set("access-control-expose-headers", v)
	}
}

// forwardNotMatchingPreflights is the policy's
// forward_not_matching_preflights, true when unset (Envoy's default).
func forwardNotMatchingPreflights(p *corsv3.CorsPolicy) bool {
	if v := p.GetForwardNotMatchingPreflights(); v != nil {
		return v.GetValue()
	}
	return true
}

// originAllowed is CorsFilter::isOriginAllowed: a matcher that matches
// the literal "*" allows every origin.
func originAllowed(p *corsv3.CorsPolicy, origin string) bool {
	for _, m := range p.GetAllowOriginStringMatch() {
		sm, err := compileStringMatcher(m, recompile) // compiled at RDS time already; cannot fail here
		if err == nil && (sm.matches("*") || sm.matches(origin)) {
			return true
		}
	}
	return false
}
