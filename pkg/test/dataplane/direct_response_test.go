// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/http"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// The router's direct responses and redirects are local replies whose
// modify_headers sets Location (for 201 and 3xx) and applies the route's
// response header mutations (Router::Filter::decodeHeaders,
// source/common/router/router.cc); only then does
// Http::Utility::prepareLocalReply (source/common/http/utility.cc) look at
// the body: a body sets content-length to its size, over the route's, and
// content-type text/plain unless the route set one; no body removes both,
// so an empty direct response carries neither (Envoy's HTTP/1 codec, like
// Go's server, then writes "content-length: 0" on the wire; what filters
// and HTTP/2 see is the header map).
func TestDirectResponseHeadersAsEnvoy(t *testing.T) {
	hv := func(k, v string, a corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: a}
	}
	const (
		appendOrAdd = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		overwrite   = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	)
	respond := func(path string, status uint32, body string, add ...*corev3.HeaderValueOption) *routev3.Route {
		return &routev3.Route{Match: prefix(path), ResponseHeadersToAdd: add, Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
			Status: status, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}},
		}}}
	}
	table, err := compileRouteTable(rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{
		respond("/empty", 500, "", hv("content-type", "application/json", overwrite), hv("content-length", "7", overwrite), hv("x-kept", "yes", appendOrAdd)),
		respond("/json", 200, "{}", hv("content-type", "application/json", appendOrAdd)),
		respond("/length", 200, "abc", hv("content-length", "99", overwrite)),
		respond("/created", 201, ""),
		respond("/found", 302, "moved"),
		respond("/ok", 200, "x"),
		{Match: prefix("/redirect"), ResponseHeadersToAdd: []*corev3.HeaderValueOption{hv("content-type", "text/html", appendOrAdd), hv("location", "http://other/", appendOrAdd)},
			Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{HostRedirect: "new.example.com"}}},
	}}), defaultRegexEngine)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		status int
		body   string
		want   http.Header // every header of the reply
	}{
		{"/empty", 500, "", http.Header{"X-Kept": {"yes"}}},
		{"/json", 200, "{}", http.Header{"Content-Type": {"application/json"}, "Content-Length": {"2"}}},
		{"/length", 200, "abc", http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"3"}}},
		{"/created", 201, "", http.Header{"Location": {"http://gw.example.com/created?q=1"}}},
		{"/found", 302, "moved", http.Header{"Location": {"http://gw.example.com/found?q=1"}, "Content-Type": {"text/plain"}, "Content-Length": {"5"}}},
		{"/ok", 200, "x", http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"1"}}},
		// Location from newUri first, then the route's own appended.
		{"/redirect", 301, "", http.Header{"Location": {"http://new.example.com/redirect?q=1", "http://other/"}}},
	} {
		req := &extproc.Request{Method: "GET", Path: c.path + "?q=1", Authority: "gw.example.com", Scheme: "http", Headers: http.Header{"X-Forwarded-Proto": {"http"}}}
		_, r := table.matchRoute(req)
		if r == nil {
			t.Fatalf("%s: no route", c.path)
		}
		resp := directReply(r, req)
		body := make([]byte, 16)
		n, _ := resp.Body.Read(body)
		if resp.Status != c.status || string(body[:n]) != c.body || !headersEqual(resp.Headers, c.want) {
			t.Errorf("%s: %d %v %q; want %d %v %q", c.path, resp.Status, resp.Headers, body[:n], c.status, c.want, c.body)
		}
	}
}

func headersEqual(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
