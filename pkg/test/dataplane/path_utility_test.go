// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

func TestNormalizePath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/", "/"},
		{"/v1/completions", "/v1/completions"},
		{"/a/./b", "/a/b"},
		{"/a/b/.", "/a/b/"},
		{"/a/b/..", "/a/"},
		{"/a/../../b", "/b"},
		{"/..", "/"},
		{"/public/../admin", "/admin"},
		{"/public/%2e%2E/admin", "/admin"},
		{"/public/%2e/admin", "/public/admin"},
		{"/a/.../b", "/a/.../b"},
		{"/a//b", "/a//b"}, // merge_slashes is another option
		{"/a/%2F/b", "/a/%2F/b"},
		{"/p?x=/../y", "/p?x=/../y"},
	} {
		got, err := normalizePath(c.in)
		if err != nil || got != c.want {
			t.Errorf("normalizePath(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"/a%41", "/a%", "/a%zz", "/a\\b", "/a b", "/a\x7f", "/caf\xc3\xa9", "relative"} {
		if got, err := normalizePath(in); !errors.Is(err, errPathNotModelled) {
			t.Errorf("normalizePath(%q) = %q, %v; want errPathNotModelled", in, got, err)
		}
	}
}

// With the connection manager's normalize_path (as core builds the HCM),
// routes match the normalized path: a dot segment cannot carry a request
// past a prefix route to another route's backend.
func TestNormalizePathBeforeRouting(t *testing.T) {
	dp := newTestDP(t, Options{})
	load(t, dp, rc(&routev3.VirtualHost{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{
		{Match: prefix("/admin"), Action: direct("admin")},
		{Match: prefix("/public"), Action: direct("public")},
	}}), seedListener(t))
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{"/public/../admin", 200, "admin"},
		{"/public/%2e%2e/admin", 200, "admin"},
		{"/../../public/x", 200, "public"},
		{"/public/%41", 400, ""},
	} {
		resp := get(t, dp, 80, "GET", "any.test", c.path, nil)
		if resp.StatusCode != c.status || (c.want != "" && bodyOf(resp) != c.want) {
			t.Errorf("%s: %d %q, want %d %q", c.path, resp.StatusCode, bodyOf(resp), c.status, c.want)
		}
	}
}

// Without upgrade_configs, an upgrade request on a matched route is a 403
// and the connection closes; an Expect: 100-continue is answered by the
// proxy and removed before the upstream.
func TestUpgradeRefusedAndExpectRemoved(t *testing.T) {
	dp := newTestDP(t, Options{})
	seen := make(chan http.Header, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case seen <- r.Header.Clone():
		default:
		}
	}))
	t.Cleanup(up.Close)
	l := seedListener(t) // without its upgrade_configs
	l.FilterChains[0].Filters[0] = setHCM(t, l.FilterChains[0].Filters[0], func(h *hcmv3.HttpConnectionManager) { h.UpgradeConfigs = nil })
	load(t, dp, edsCluster(t, "up", false), cla("up", up.Listener.Addr().String()),
		rc(&routev3.VirtualHost{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{Match: prefix("/"), Action: toCluster("up")}}}), l)

	resp := get(t, dp, 80, "GET", "any.test", "/ws", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}})
	if resp.StatusCode != http.StatusForbidden || !resp.Close {
		t.Errorf("upgrade: %d (close %v), want 403 and the connection closed", resp.StatusCode, resp.Close)
	}

	req, err := http.NewRequest("POST", "http://"+dp.Addr(80).String()+"/x", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Expect", "100-continue")
	tr := &http.Transport{ExpectContinueTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	r2, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = r2.Body.Close()
	if r2.StatusCode != 200 {
		t.Fatalf("expect: %d", r2.StatusCode)
	}
	if h := <-seen; h.Get("Expect") != "" {
		t.Errorf("the upstream saw Expect: %q; Envoy removes it when it answers 100 itself", h.Get("Expect"))
	}
}
