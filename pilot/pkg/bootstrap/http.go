// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/infermesh/infermesh/pilot/pkg/features"
)

// pilot-discovery serves HTTP on two listeners:
//
//   - the monitoring listener (--http-address, on the network: the Service
//     port and the kubelet's readiness probe) serves MonitoringHandler:
//     /metrics, /ready and /healthz/config, which show no user's
//     configuration;
//   - the debug listener (--debug-address, loopback by default) serves
//     DebugHandler: every /debug/ endpoint. They are unauthenticated and
//     show every Gateway's configuration (config_dump, syncz, krtz), the
//     feature flags and the process (pprof, including its command line),
//     so only someone already inside the pod's network namespace (kubectl
//     port-forward, kubectl exec) reaches them unless an operator binds the
//     debug listener elsewhere.

// DebugHandler serves every HTTP endpoint: the ADS server's
// (/debug/config_dump, /debug/syncz, /debug/krtz, /metrics, /ready),
// /debug/features (the feature flags in effect) and Go's profiles under
// /debug/pprof/ (net/http/pprof). It is for the debug listener only.
func (s *Server) DebugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/debug/features", features.Handler(s.args.Features))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", s.xds.Handler())
	return mux
}

// MonitoringHandler serves what may be reached from the network: every
// endpoint of DebugHandler except the debug endpoints (withoutDebug), so
// /metrics, /ready and /healthz/config.
func (s *Server) MonitoringHandler() http.Handler { return withoutDebug(s.DebugHandler()) }

// withoutDebug answers 404 for every request whose path, decoded or as
// sent, names something under /debug once cleaned, and passes the others to
// h. Any new endpoint under /debug/ is kept off the network by this rule.
func withoutDebug(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isDebugPath(r.URL.Path) || isDebugPath(r.URL.EscapedPath()) {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func isDebugPath(p string) bool {
	c := path.Clean("/" + p)
	return c == "/debug" || strings.HasPrefix(c, "/debug/")
}

// serveHTTP serves h on lis until ctx ends, then shuts the server down
// (waiting up to 5 s for requests in flight). A serving error is sent to
// errs, prefixed with name.
func serveHTTP(ctx context.Context, wg *sync.WaitGroup, errs chan<- error, name string, lis net.Listener, h http.Handler) {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	wg.Go(func() {
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("%s: %w", name, err)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = hs.Shutdown(shutdown)
	})
}
