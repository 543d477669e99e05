// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package bootstrap

import (
	"net/http"
	"net/http/httptest"
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
