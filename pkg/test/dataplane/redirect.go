// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"fmt"
	"net/http"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

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
