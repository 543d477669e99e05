// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Response headers every answer carries, as the seed's vLLM simulator sends them.
const (
	PodHeader  = "x-inference-pod"  // Config.PodName
	PortHeader = "x-inference-port" // decimal port the request arrived on
)

// HoldHeader names a hold gate: a request carrying it, once running, blocks
// until [Server.Release] opens that gate (or the server closes).
const HoldHeader = "x-sim-hold"

// maxBody caps the request bodies the simulator reads, in bytes.
const maxBody = 8 << 20

// Request is an inference request as received: method, path, headers and body.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Server is one simulated vLLM pod. It is an http.Handler; [Server.Start] also
// serves it on a listener of its own. Safe for concurrent use.
type Server struct {
	cfg     Config
	eng     *engine
	reg     *prometheus.Registry
	metrics http.Handler

	mu   sync.Mutex
	last *Request
	srv  *http.Server
	addr net.Addr
	done chan struct{} // closed when Serve returns
}

var _ http.Handler = (*Server)(nil)

// New returns a server for cfg with defaults applied. It panics if
// cfg.Validate fails: a test's configuration is the programmer's to fix.
func New(cfg Config) *Server {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, eng: newEngine(cfg), reg: prometheus.NewRegistry()}
	s.reg.MustRegister(newCollector(cfg, s.eng))
	s.metrics = promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	return s
}

// Run starts a server for cfg on addr (host:port; host must be a loopback
// address, port 0 picks a free one; "" means 127.0.0.1:0), closes it when the
// test ends, and fails the test if it cannot start.
func Run(t testing.TB, addr string, cfg Config) *Server {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s := New(cfg)
	if _, err := s.Start(addr); err != nil {
		t.Fatalf("vllmsim: start %s on %s: %v", cfg.PodName, addr, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("vllmsim: close %s: %v", cfg.PodName, err)
		}
	})
	return s
}

// Start listens on addr (host:port, host a loopback IP or "localhost") and
// serves in the background until [Server.Close]. It returns the bound address.
func (s *Server) Start(addr string) (net.Addr, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("vllmsim: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("vllmsim: address %q is not loopback", addr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil, errors.New("vllmsim: server already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("vllmsim: listen: %w", err)
	}
	s.srv = &http.Server{Handler: s}
	s.addr = ln.Addr()
	s.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln) // always ErrServerClosed after Shutdown
	}(s.srv, s.done)
	return s.addr, nil
}

// Close fails every waiting or held request with 503, refuses new inference
// requests with 503, and, if started, stops the listener and waits for every
// handler to return. Safe to call more than once.
func (s *Server) Close() error {
	s.eng.close()
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(context.Background())
	<-done
	return err
}

// Addr is the bound address, nil before [Server.Start].
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// URL is "http://" plus the bound address, "" before [Server.Start].
func (s *Server) URL() string {
	if a := s.Addr(); a != nil {
		return "http://" + a.String()
	}
	return ""
}

// PodName is Config.PodName.
func (s *Server) PodName() string { return s.cfg.PodName }

// Registry is the server's own Prometheus registry, the source of /metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Stats is a snapshot of the current load.
func (s *Server) Stats() Stats {
	st, _ := s.eng.snapshot()
	return st
}

// Served is the number of inference requests answered with 200 so far. A
// request counts (and stops running) before its last byte is written, so a
// client that has read a whole answer sees it counted.
func (s *Server) Served() int { return s.Stats().Served }

// WaitUntil blocks until cond holds for the server's Stats, re-checking on
// every state change (no polling), or until ctx ends; it returns the last
// Stats seen and ctx's error if it gave up.
func (s *Server) WaitUntil(ctx context.Context, cond func(Stats) bool) (Stats, error) {
	return s.eng.waitUntil(ctx, cond)
}

// Release opens hold gate id for good: requests held there proceed, and later
// ones carrying it pass straight through.
func (s *Server) Release(id string) { s.eng.release(id) }

// LastRequest is the latest inference request received (rejected ones
// included), with a copy of its headers and body; false if none yet.
func (s *Server) LastRequest() (Request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return Request{}, false
	}
	r := *s.last
	r.Header = r.Header.Clone()
	r.Body = append([]byte(nil), r.Body...)
	return r, true
}

// ServeHTTP answers one request; see the package documentation for the routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(PodHeader, s.cfg.PodName)
	w.Header().Set(PortHeader, s.port(r))
	switch r.URL.Path {
	case "/v1/completions":
		s.allow(w, r, http.MethodPost, func() { s.inference(w, r, false) })
	case "/v1/chat/completions":
		s.allow(w, r, http.MethodPost, func() { s.inference(w, r, true) })
	case "/v1/models":
		s.allow(w, r, http.MethodGet, func() { writeJSON(w, http.StatusOK, s.models()) })
	case "/metrics":
		s.allow(w, r, http.MethodGet, func() { s.metrics.ServeHTTP(w, r) })
	case "/health":
		s.allow(w, r, http.MethodGet, func() { w.WriteHeader(http.StatusOK) })
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	}
}

// allow runs h if r uses method, else answers 405 as vLLM's web framework does.
func (s *Server) allow(w http.ResponseWriter, r *http.Request, method string, h func()) {
	if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", method)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
		return
	}
	h()
}

// port is the port r arrived on, or Config.Port when r has no local address.
func (s *Server) port(r *http.Request) string {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			return p
		}
	}
	return strconv.Itoa(s.cfg.Port)
}

func (s *Server) models() ModelList {
	created := s.cfg.Now().Unix()
	list := ModelList{Object: ObjectList, Data: []ModelCard{{
		ID: s.cfg.Model, Object: ObjectModel, Created: created, OwnedBy: "vllm", Root: s.cfg.Model,
	}}}
	for _, l := range s.cfg.LoRAs {
		parent := s.cfg.Model
		list.Data = append(list.Data, ModelCard{
			ID: l, Object: ObjectModel, Created: created, OwnedBy: "vllm", Root: l, Parent: &parent,
		})
	}
	return list
}

// servesModel reports whether name is the base model (or empty) or an adapter,
// and which adapter ("" for the base model).
func (s *Server) servesModel(name string) (lora string, ok bool) {
	if name == "" || name == s.cfg.Model {
		return "", true
	}
	for _, l := range s.cfg.LoRAs {
		if l == name {
			return l, true
		}
	}
	return "", false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: APIError{Message: msg, Type: errorType(status), Code: status}})
}

// newID returns prefix followed by a random UUID.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// readRequest reads r's body and records r as the last request.
func (s *Server) readRequest(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	s.mu.Lock()
	s.last = &Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	s.mu.Unlock()
	s.eng.receive()
	return body, err
}
