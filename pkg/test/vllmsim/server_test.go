// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestModels(t *testing.T) {
	s := Run(t, "", seedConfig("p"))
	r := mustDo(t, client(t), http.MethodGet, s.URL()+"/v1/models", "")
	if r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
	base := "meta-llama/Llama-3.1-8B-Instruct"
	want := ModelList{Object: "list", Data: []ModelCard{
		{ID: base, Object: "model", Created: epoch.Unix(), OwnedBy: "vllm", Root: base},
		{ID: "reviews-1", Object: "model", Created: epoch.Unix(), OwnedBy: "vllm", Root: "reviews-1", Parent: &base},
	}}
	if d := cmp.Diff(want, decode[ModelList](t, r.body)); d != "" {
		t.Errorf("/v1/models (-want +got):\n%s", d)
	}
	if !strings.Contains(string(r.body), `"parent":null`) {
		t.Errorf("base model's parent is not null: %s", r.body)
	}
}

func TestEveryResponseCarriesPodHeaders(t *testing.T) {
	s := Run(t, "", seedConfig("pod-a"))
	c := client(t)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/v1/models", 200},
		{http.MethodGet, "/metrics", 200},
		{http.MethodGet, "/health", 200},
		{http.MethodGet, "/nope", 404},
		{http.MethodGet, "/v1/completions", 405},
		{http.MethodPost, "/v1/models", 405},
	} {
		r := mustDo(t, c, tc.method, s.URL()+tc.path, "")
		if r.status != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, r.status, tc.status)
		}
		checkPodHeaders(t, r, "pod-a", portOf(s))
	}
}

// Pods of one pool share a port on different addresses, as in a cluster.
func TestSeveralPodsShareAPortOnLoopbackAddresses(t *testing.T) {
	a := Run(t, "127.0.0.1:0", seedConfig("pod-a"))
	port := portOf(a)
	b := Run(t, "127.0.0.2:"+port, seedConfig("pod-b"))
	c := client(t)
	for _, s := range []*Server{a, b} {
		r := mustDo(t, c, http.MethodPost, s.URL()+"/v1/completions", seedPrompt)
		checkPodHeaders(t, r, s.PodName(), port)
		if s.Served() != 1 {
			t.Errorf("%s served %d, want 1", s.PodName(), s.Served())
		}
	}
}

func TestHandlerWithoutListenerUsesConfigPort(t *testing.T) {
	cfg := seedConfig("p")
	cfg.Port = 8000
	s := New(cfg)
	defer s.Close()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(seedPrompt)))
	if rec.Code != 200 || rec.Header().Get(PortHeader) != "8000" || rec.Header().Get(PodHeader) != "p" {
		t.Errorf("status %d, headers %v", rec.Code, rec.Header())
	}
}

func TestStartRefusesNonLoopbackAndSecondStart(t *testing.T) {
	s := New(seedConfig("p"))
	defer s.Close()
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "nope"} {
		if _, err := s.Start(addr); err == nil {
			t.Errorf("Start(%q) succeeded", addr)
		}
	}
	a, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if ip := a.(*net.TCPAddr).IP; !ip.IsLoopback() {
		t.Errorf("bound %v", a)
	}
	if _, err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded")
	}
}

func TestCloseFailsHeldAndWaitingRequests(t *testing.T) {
	cfg := seedConfig("p")
	cfg.MaxRunning = 1
	s := New(cfg)
	if _, err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	held := async(t.Context(), c, http.MethodPost, s.URL()+"/v1/completions", seedPrompt, HoldHeader, "g")
	waitFor(t, s, "one held", func(st Stats) bool { return st.Held["g"] == 1 })
	queued := async(t.Context(), c, http.MethodPost, s.URL()+"/v1/completions", seedPrompt)
	waitFor(t, s, "one waiting", func(st Stats) bool { return st.Waiting == 1 })

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, r := range []reply{recv(t, held), recv(t, queued)} {
		if r.status != http.StatusServiceUnavailable || decode[ErrorResponse](t, r.body).Error.Code != 503 {
			t.Errorf("status %d body %s, want 503", r.status, r.body)
		}
	}
	if st := s.Stats(); st.Running != 0 || st.Waiting != 0 || st.Served != 0 {
		t.Errorf("stats after Close: %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := seedConfig("p")
	for name, mut := range map[string]func(*Config){
		"no pod":        func(c *Config) { c.PodName = "" },
		"no model":      func(c *Config) { c.Model = "" },
		"lora is base":  func(c *Config) { c.LoRAs = []string{c.Model} },
		"lora twice":    func(c *Config) { c.LoRAs = []string{"a", "a"} },
		"empty lora":    func(c *Config) { c.LoRAs = []string{""} },
		"negative runs": func(c *Config) { c.MaxRunning = -1 },
		"negative wait": func(c *Config) { c.Latency = -1 },
	} {
		c := ok
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("seed config: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("New accepted an invalid Config")
		}
	}()
	New(Config{})
}

func TestParseLoRAModules(t *testing.T) {
	got, err := ParseLoRAModules(`{"name": "reviews-1"}`, `{"name": "sql", "path": "/adapters/sql"}`, "old=/path")
	if err != nil || !cmp.Equal(got, []string{"reviews-1", "sql", "old"}) {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{`{"path": "/x"}`, `{"name":`, "=/x"} {
		if _, err := ParseLoRAModules(bad); err == nil {
			t.Errorf("ParseLoRAModules(%q) succeeded", bad)
		}
	}
}
