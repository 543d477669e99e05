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
	"net/netip"
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
//     debug listener elsewhere. It also answers only requests whose Host
//     names loopback (debugHostOnly): a web page the user's browser loads
//     while a port-forward runs can make its own name resolve to 127.0.0.1
//     (DNS rebinding) and so reach the forwarded port, but its requests
//     carry that name as Host and are refused.

// DebugHandler serves every HTTP endpoint: the ADS server's
// (/debug/config_dump, /debug/syncz, /debug/krtz, /metrics, /ready),
// /debug/features (the feature flags in effect) and Go's profiles under
// /debug/pprof/ (net/http/pprof), to requests whose Host is a loopback
// name or address (debugHostOnly). It is for the debug listener only.
func (s *Server) DebugHandler() http.Handler { return debugHostOnly(s.allEndpoints()) }

// allEndpoints is the mux of every HTTP endpoint, unguarded.
func (s *Server) allEndpoints() http.Handler {
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
// /metrics, /ready and /healthz/config, whatever the Host (the kubelet's
// probe and Prometheus use the pod's address).
func (s *Server) MonitoringHandler() http.Handler { return withoutDebug(s.allEndpoints()) }

// debugHostOnly answers 421 Misdirected Request, with a body saying why,
// to every request whose Host is not one of (any port, or none):
//   - localhost (any case);
//   - a loopback address: 127.0.0.0/8, [::1];
//   - the IP address the request's connection arrived on (the listener's
//     own address, when an operator binds --debug-address beyond loopback
//     and a client dials it by address).
//
// Each of these is a name a DNS-rebinding page cannot put in Host: a
// browser sends the page's own host name, and a page served from one of
// these addresses is the debug listener itself. A missing Host is refused
// too. Other requests pass to h.
func debugHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if !debugHostAllowed(r.Host, local) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_, _ = fmt.Fprintf(w, "421 misdirected request: the debug endpoints answer only requests for localhost, "+
				"a loopback address or this listener's own address (Host %q is none of them), so that a web page "+
				"cannot read them through DNS rebinding; use http://localhost:PORT/ (kubectl port-forward)\n", r.Host)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// debugHostAllowed reports whether host (a Host header: name or address,
// with or without port) is localhost, a loopback address, or the IP of
// local (the connection's local address; nil when unknown).
func debugHostAllowed(host string, local net.Addr) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1] // "[::1]" without a port
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return false
	}
	if ip.Unmap().IsLoopback() {
		return true
	}
	if a, ok := local.(*net.TCPAddr); ok {
		if l, ok := netip.AddrFromSlice(a.IP); ok && !l.Unmap().IsUnspecified() && l.Unmap() == ip.Unmap() {
			return true
		}
	}
	return false
}

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
