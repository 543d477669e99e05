// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/http"
)

// adminHandler is Envoy's admin interface (source/server/admin/admin.cc),
// with only the handler our bootstrap's status listener uses:
//
//   - /ready (ServerInfoHandler::handlerReady, source/server/admin/
//     server_info_handler.cc): the server state's name and a newline, 200
//     when LIVE, else 503. It does not change server state, so any method
//     is served, as Envoy serves it.
//
// Every other path is 404 with Envoy's "invalid path" text listing the
// handlers; the other admin handlers (/stats, /config_dump, /server_info,
// ...) are not implemented and answer the same way. The path is compared
// without its query string, as Envoy's admin does. Responses carry
// Envoy's admin defaults: text/plain; charset=UTF-8, no caching, nosniff
// (AdminImpl::populateFallbackResponseHeaders).
type adminHandler struct{ dp *DataPlane }

// adminHelp is the one line of the admin's help that the data plane
// implements, in Envoy's words.
const adminHelp = "  /ready: print server state, return 200 if LIVE, otherwise return 503\n"

func (h adminHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/plain; charset=UTF-8")
	hdr.Set("Cache-Control", "no-cache, max-age=0")
	hdr.Set("X-Content-Type-Options", "nosniff")
	if r.URL.Path != "/ready" {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("invalid path. admin commands are:\n" + adminHelp))
		return
	}
	state := h.dp.State()
	code := http.StatusServiceUnavailable
	if state == StateLive {
		code = http.StatusOK
	}
	w.WriteHeader(code)
	_, _ = w.Write([]byte(state.String() + "\n"))
}
