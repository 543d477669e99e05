// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package bootstrap

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWithoutDebug: every spelling of a path under /debug/ is refused
// before the mux sees it; the others pass.
func TestWithoutDebug(t *testing.T) {
	h := withoutDebug(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for target, want := range map[string]int{
		"/metrics":                       http.StatusTeapot,
		"/ready":                         http.StatusTeapot,
		"/debugger":                      http.StatusTeapot,
		"/debug":                         http.StatusNotFound,
		"/debug/":                        http.StatusNotFound,
		"/debug/syncz":                   http.StatusNotFound,
		"/debug/config_dump?gateway=a/b": http.StatusNotFound,
		"/debug/pprof/cmdline":           http.StatusNotFound,
		"//debug/syncz":                  http.StatusNotFound,
		"/./debug/syncz":                 http.StatusNotFound,
		"/metrics/../debug/syncz":        http.StatusNotFound,
		"/%64ebug/syncz":                 http.StatusNotFound,
		"/debug%2Fsyncz":                 http.StatusNotFound,
	} {
		r := httptest.NewRequest(http.MethodGet, "http://pilot"+target, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("GET %s: %d, want %d", target, w.Code, want)
		}
	}
}

// TestDebugHostOnly: the debug handler answers a request only when its Host
// is localhost, a loopback address or the connection's own address, with or
// without a port; anything else (the name a DNS-rebinding page carries,
// another address, none) gets 421 and a body saying why.
func TestDebugHostOnly(t *testing.T) {
	h := debugHostOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	local := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 15015}
	for host, want := range map[string]int{
		"localhost":                http.StatusTeapot,
		"localhost:15015":          http.StatusTeapot,
		"LOCALHOST:8080":           http.StatusTeapot,
		"127.0.0.1":                http.StatusTeapot,
		"127.0.0.1:15015":          http.StatusTeapot,
		"127.200.3.4:1":            http.StatusTeapot,
		"[::1]":                    http.StatusTeapot,
		"[::1]:15015":              http.StatusTeapot,
		"[::ffff:127.0.0.1]:15015": http.StatusTeapot,
		"10.1.2.3:15015":           http.StatusTeapot, // the listener's own address
		"10.1.2.3":                 http.StatusTeapot,
		"rebind.example.com":       http.StatusMisdirectedRequest,
		"rebind.example.com:15015": http.StatusMisdirectedRequest,
		"localhost.example.com":    http.StatusMisdirectedRequest,
		"localhost.":               http.StatusMisdirectedRequest,
		"evil.localhost":           http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io:15015":   http.StatusMisdirectedRequest,
		"10.1.2.4:15015":           http.StatusMisdirectedRequest,
		"0.0.0.0:15015":            http.StatusMisdirectedRequest,
		"[fe80::1%lo]:15015":       http.StatusMisdirectedRequest,
		"":                         http.StatusMisdirectedRequest,
	} {
		r := httptest.NewRequest(http.MethodGet, "/debug/syncz", nil)
		r.Host = host
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(local)))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
		if want == http.StatusMisdirectedRequest && !strings.Contains(w.Body.String(), "DNS rebinding") {
			t.Errorf("Host %q: body %q does not say why", host, w.Body.String())
		}
	}
	// A listener bound to every address: the unspecified address is never
	// a Host that passes.
	if debugHostAllowed("0.0.0.0", &net.TCPAddr{IP: net.IPv4zero}) {
		t.Error("Host 0.0.0.0 passed on a wildcard listener")
	}
	// Without a known local address only loopback passes.
	if debugHostAllowed("10.1.2.3", nil) || !debugHostAllowed("localhost", nil) {
		t.Error("without a local address: want loopback only")
	}
}
