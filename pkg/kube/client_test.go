// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestNewFromRESTConfigRateLimit(t *testing.T) {
	in := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 5, Burst: 10}
	c, err := NewFromRESTConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.RESTConfig()
	if cfg.QPS != DefaultQPS || cfg.Burst != DefaultBurst || cfg.RateLimiter == nil {
		t.Errorf("defaults: QPS %v burst %d limiter %v", cfg.QPS, cfg.Burst, cfg.RateLimiter)
	}
	if in.QPS != 5 || in.RateLimiter != nil {
		t.Errorf("the caller's config was modified: %+v", in)
	}
	if !strings.HasPrefix(cfg.UserAgent, "infermesh/") {
		t.Errorf("user agent %q", cfg.UserAgent)
	}

	c, err = NewFromRESTConfig(in, WithQPS(7), WithBurst(9), WithResync(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RESTConfig(); got.QPS != 7 || got.Burst != 9 {
		t.Errorf("options: QPS %v burst %d", got.QPS, got.Burst)
	}
}

func TestInvalidOptions(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
	for name, opt := range map[string]Option{
		"zero QPS":        WithQPS(0),
		"zero burst":      WithBurst(0),
		"negative resync": WithResync(-time.Second),
	} {
		if _, err := NewFromRESTConfig(cfg, opt); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestNewFromKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: test
  user: {token: abc}
contexts:
- name: test
  context: {cluster: test, user: test}
current-context: test
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewFromKubeconfig(path, WithQPS(50))
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.RESTConfig(); cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "abc" || cfg.QPS != 50 {
		t.Errorf("config from kubeconfig: host %q token %q QPS %v", cfg.Host, cfg.BearerToken, cfg.QPS)
	}

	if _, err := NewFromKubeconfig(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing kubeconfig: no error")
	}
}
