// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// seedMetrics is the seed's scrape of an idle pod, as its write-up shows it.
const seedMetrics = `
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig.
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",num_gpu_blocks="1024"} 1
# HELP vllm:kv_cache_usage_perc Prometheus metric for the fraction of KV-cache blocks currently in use (from 0 to 1).
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 1.790053209e+09
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0
# HELP vllm:num_requests_waiting Prometheus metric for the number of queued requests.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0
`

func TestMetricsMatchSeedWhenIdle(t *testing.T) {
	s := Run(t, "", seedConfig("p"))
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	if err := testutil.ScrapeAndCompare(s.URL()+"/metrics", strings.NewReader(seedMetrics)); err != nil {
		t.Error(err)
	}
}

// load renders the four load series the way /metrics shows them.
func load(running, waiting int, kv float64, loraRunning, loraWaiting string, at int64) string {
	return fmt.Sprintf(`
# HELP vllm:kv_cache_usage_perc Prometheus metric for the fraction of KV-cache blocks currently in use (from 0 to 1).
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="base"} %g
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters=%q,waiting_lora_adapters=%q} %d
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="base"} %d
# HELP vllm:num_requests_waiting Prometheus metric for the number of queued requests.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="base"} %d
`, kv, loraRunning, loraWaiting, at, running, waiting)
}

var loadSeries = []string{MetricKVCacheUsage, MetricLoRARequests, MetricRequestsRunning, MetricRequestsWaiting}

// settableClock is a clock the test moves by hand.
type settableClock struct{ unix atomic.Int64 }

func (c *settableClock) now() time.Time { return time.Unix(c.unix.Load(), 0) }

// Each request: 4 prompt words + 4 generated tokens = 8 tokens = 2 blocks of 4.
func loadConfig(clock *settableClock) Config {
	return Config{
		PodName: "p", Model: "base", LoRAs: []string{"reviews-1", "sql"}, MaxLoRAs: 2,
		MaxRunning: 2, BlockSize: 4, NumGPUBlocks: 10, OutputTokens: 4, Now: clock.now,
	}
}

func body(model string) string {
	return fmt.Sprintf(`{"model": %q, "prompt": "a b c d"}`, model)
}

func TestMetricsFollowHeldRequestsThenDropToZero(t *testing.T) {
	clock := &settableClock{}
	clock.unix.Store(1000)
	s := Run(t, "", loadConfig(clock))
	c := client(t)
	url := s.URL() + "/v1/completions"

	clock.unix.Store(2000)
	var replies []<-chan reply
	for _, m := range []string{"reviews-1", "base", "sql"} {
		replies = append(replies, async(t.Context(), c, http.MethodPost, url, body(m), HoldHeader, "g"))
	}
	waitFor(t, s, "two held, one waiting", func(st Stats) bool { return st.Held["g"] == 2 && st.Waiting == 1 })

	st := s.Stats()
	if st.Running != 2 || st.UsedBlocks != 4 || st.KVCacheUsage != 0.4 || st.Received != 3 || st.Served != 0 {
		t.Errorf("stats while held: %+v", st)
	}
	// Which two run depends on arrival order; the series must agree with Stats.
	want := load(2, 1, 0.4, strings.Join(st.RunningLoRAs, ","), strings.Join(st.WaitingLoRAs, ","), 2000)
	if err := testutil.GatherAndCompare(s.Registry(), strings.NewReader(want), loadSeries...); err != nil {
		t.Error(err)
	}
	if got := len(st.RunningLoRAs) + len(st.WaitingLoRAs); got != 2 {
		t.Errorf("adapters running %q, waiting %q: want reviews-1 and sql between them", st.RunningLoRAs, st.WaitingLoRAs)
	}

	clock.unix.Store(3000)
	s.Release("g")
	for i, ch := range replies {
		if r := recv(t, ch); r.status != http.StatusOK {
			t.Errorf("request %d: status %d body %s", i, r.status, r.body)
		}
	}
	if err := testutil.GatherAndCompare(s.Registry(), strings.NewReader(load(0, 0, 0, "", "", 3000)), loadSeries...); err != nil {
		t.Error(err)
	}
	if s.Served() != 3 {
		t.Errorf("served %d, want 3", s.Served())
	}
}

func TestMaxLoRAsHoldsBackANewAdapterButNotTheBaseModel(t *testing.T) {
	clock := &settableClock{}
	cfg := loadConfig(clock)
	cfg.MaxLoRAs, cfg.MaxRunning = 1, 0
	s := Run(t, "", cfg)
	c := client(t)
	url := s.URL() + "/v1/completions"

	first := async(t.Context(), c, http.MethodPost, url, body("reviews-1"), HoldHeader, "g")
	waitFor(t, s, "reviews-1 held", func(st Stats) bool { return st.Held["g"] == 1 })
	second := async(t.Context(), c, http.MethodPost, url, body("sql"))
	st := waitFor(t, s, "sql waiting", func(st Stats) bool { return st.Waiting == 1 })
	if fmt.Sprint(st.RunningLoRAs, st.WaitingLoRAs) != "[reviews-1] [sql]" {
		t.Errorf("running %q waiting %q", st.RunningLoRAs, st.WaitingLoRAs)
	}
	// The base model passes the waiting adapter request.
	if r := mustDo(t, c, http.MethodPost, url, body("base")); r.status != http.StatusOK {
		t.Fatalf("base model request: status %d", r.status)
	}
	if st := s.Stats(); st.Waiting != 1 || st.Served != 1 {
		t.Errorf("after the base request: %+v", st)
	}
	s.Release("g")
	for _, ch := range []<-chan reply{first, second} {
		if r := recv(t, ch); r.status != http.StatusOK {
			t.Errorf("status %d", r.status)
		}
	}
	if st := s.Stats(); st.Served != 3 || st.Running != 0 || st.Waiting != 0 {
		t.Errorf("final stats %+v", st)
	}
}

func TestKVCacheCapacityHoldsRequestsBack(t *testing.T) {
	clock := &settableClock{}
	cfg := loadConfig(clock)
	cfg.NumGPUBlocks, cfg.MaxRunning = 3, 0
	s := Run(t, "", cfg)
	c := client(t)
	url := s.URL() + "/v1/completions"

	first := async(t.Context(), c, http.MethodPost, url, body("base"), HoldHeader, "g")
	waitFor(t, s, "first held", func(st Stats) bool { return st.Held["g"] == 1 })
	second := async(t.Context(), c, http.MethodPost, url, body("base"), HoldHeader, "g")
	st := waitFor(t, s, "second waiting for blocks", func(st Stats) bool { return st.Waiting == 1 })
	if st.Running != 1 || st.UsedBlocks != 2 || st.KVCacheUsage != 2.0/3 {
		t.Errorf("stats %+v", st)
	}
	s.Release("g")
	recv(t, first)
	recv(t, second)

	// A request bigger than the whole cache still runs when nothing else does,
	// and the usage is capped at 1.
	big := async(t.Context(), c, http.MethodPost, url,
		`{"prompt": "one two three four five six seven eight nine ten eleven twelve"}`, HoldHeader, "big")
	st = waitFor(t, s, "big held", func(st Stats) bool { return st.Held["big"] == 1 })
	if st.UsedBlocks != 4 || st.KVCacheUsage != 1 {
		t.Errorf("oversized request: %+v", st)
	}
	s.Release("big")
	if r := recv(t, big); r.status != http.StatusOK {
		t.Errorf("oversized request: status %d", r.status)
	}
}

func TestClientGoneWhileWaitingLeavesTheQueue(t *testing.T) {
	clock := &settableClock{}
	cfg := loadConfig(clock)
	cfg.MaxRunning = 1
	s := Run(t, "", cfg)
	c := client(t)
	url := s.URL() + "/v1/completions"

	first := async(t.Context(), c, http.MethodPost, url, body("sql"), HoldHeader, "g")
	waitFor(t, s, "first held", func(st Stats) bool { return st.Held["g"] == 1 })
	ctx, cancel := context.WithCancel(t.Context())
	gone := async(ctx, c, http.MethodPost, url, body("reviews-1"))
	waitFor(t, s, "second waiting", func(st Stats) bool { return st.Waiting == 1 })
	cancel()
	st := waitFor(t, s, "queue empty", func(st Stats) bool { return st.Waiting == 0 })
	if st.Running != 1 || len(st.WaitingLoRAs) != 0 {
		t.Errorf("after the client left: %+v", st)
	}
	if r := <-gone; r.err == nil {
		t.Errorf("cancelled request got status %d", r.status)
	}
	s.Release("g")
	recv(t, first)
	if st := s.Stats(); st.Served != 1 || st.Received != 2 || st.Running != 0 {
		t.Errorf("final stats %+v", st)
	}
}

func TestReleasedGateStaysOpenAndLatencyStillAnswers(t *testing.T) {
	cfg := seedConfig("p")
	cfg.Latency = time.Millisecond
	s := Run(t, "", cfg)
	s.Release("open")
	r := mustDo(t, client(t), http.MethodPost, s.URL()+"/v1/completions", seedPrompt, HoldHeader, "open")
	if r.status != http.StatusOK || len(s.Stats().Held) != 0 {
		t.Errorf("status %d, stats %+v", r.status, s.Stats())
	}
}
