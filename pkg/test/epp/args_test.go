// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package epp

import (
	"slices"
	"strings"
	"testing"
)

func TestArgs(t *testing.T) {
	p := ports{grpc: 9102, health: 9103, metrics: 9190}
	common := []string{
		"--pool-namespace=ns", "--pool-name=pool", "--grpc-port=9102", "--grpc-health-port=9103",
		"--metrics-port=9190",
	}
	lw := args(Config{Kind: LWEPP, PoolNamespace: "ns", PoolName: "pool", ExtraArgs: []string{"--v=4"}}, p)
	if want := append(append(common[:len(common):len(common)], "--secure-serving=false"), "--v=4"); !slices.Equal(lw, want) {
		t.Errorf("lwepp args:\n got %q\nwant %q", lw, want)
	}
	full := args(Config{Kind: FullEPP, PoolNamespace: "ns", PoolName: "pool", TLS: true}, p)
	if !slices.Equal(full[:len(common)], common) || full[len(common)] != "--secure-serving=true" {
		t.Errorf("full epp args start %q", full)
	}
	for _, want := range []string{
		"--kv-cache-usage-percentage-metric=vllm:kv_cache_usage_perc",
		"--config-text=" + FullEPPSchedulerConfig,
		"--enable-pprof=false",
	} {
		if !slices.Contains(full, want) {
			t.Errorf("full epp args lack %q", want)
		}
	}
	if !strings.Contains(FullEPPSchedulerConfig, "kind: EndpointPickerConfig") {
		t.Error("scheduler config is not an EndpointPickerConfig")
	}
}

func TestChildEnvReplacesKubeconfig(t *testing.T) {
	got := childEnv([]string{"HOME=/root", "KUBECONFIG=/elsewhere", "KUBECONFIGX=keep"}, Config{Kubeconfig: "/k"})
	want := []string{"HOME=/root", "KUBECONFIGX=keep", "KUBECONFIG=/k"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLogBufferKeepsTail(t *testing.T) {
	l := newLogBuffer(8)
	for _, s := range []string{"abcd", "efgh", "ij"} {
		if n, err := l.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got, want := l.String(), "(first 2 bytes cut)\ncdefghij"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := l.Tail(3), "(first 7 bytes cut)\nhij"; got != want {
		t.Errorf("Tail(3) = %q, want %q", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Kind: LWEPP, Kubeconfig: "/k", PoolNamespace: "ns", PoolName: "p"}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Config){
		"kind":       func(c *Config) { c.Kind = "x" },
		"kubeconfig": func(c *Config) { c.Kubeconfig = "" },
		"pool":       func(c *Config) { c.PoolName = "" },
		"port":       func(c *Config) { c.GRPCPort = 70000 },
	} {
		c := ok
		mutate(&c)
		if c.validate() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
