// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/http"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// applyCORS is the CORS filter with the route's CorsPolicy (nil: the
// filter does nothing). A request without Origin, or whose Origin matches
// no allow_origin_string_match, passes untouched. A preflight (OPTIONS with
// Origin and Access-Control-Request-Method) from an allowed origin gets a
// local 200 with access-control-allow-origin (the origin),
// -allow-methods, -allow-headers, -max-age and -allow-credentials as
// configured. Any other request from an allowed origin continues, and the
// returned headers (allow-origin, allow-credentials, expose-headers) are
// added to its response.
func applyCORS(p *corsv3.CorsPolicy, req *extproc.Request) (*extproc.Response, http.Header) {
	if p == nil {
		return nil, nil
	}
	origin := req.Headers.Get("origin")
	if origin == "" || !originAllowed(p, origin) {
		return nil, nil
	}
	creds := p.GetAllowCredentials().GetValue()
	if req.Method == http.MethodOptions && req.Headers.Get("access-control-request-method") != "" {
		resp := localReply(http.StatusOK, "")
		h := resp.Headers
		h.Set("access-control-allow-origin", origin)
		if creds {
			h.Set("access-control-allow-credentials", "true")
		}
		if v := p.GetAllowMethods(); v != "" {
			h.Set("access-control-allow-methods", v)
		}
		if v := p.GetAllowHeaders(); v != "" {
			h.Set("access-control-allow-headers", v)
		}
		if v := p.GetMaxAge(); v != "" {
			h.Set("access-control-max-age", v)
		}
		return resp, nil
	}
	h := http.Header{}
	h.Set("access-control-allow-origin", origin)
	if creds {
		h.Set("access-control-allow-credentials", "true")
	}
	if v := p.GetExposeHeaders(); v != "" {
		h.Set("access-control-expose-headers", v)
	}
	return nil, h
}

func originAllowed(p *corsv3.CorsPolicy, origin string) bool {
	for _, m := range p.GetAllowOriginStringMatch() {
		sm, err := compileStringMatcher(m) // compiled at RDS time already; cannot fail here
		if err == nil && sm.matches(origin) {
			return true
		}
	}
	return false
}
