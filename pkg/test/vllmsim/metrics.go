// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, as vLLM exports them.
const (
	MetricRequestsRunning = "vllm:num_requests_running"
	MetricRequestsWaiting = "vllm:num_requests_waiting"
	MetricKVCacheUsage    = "vllm:kv_cache_usage_perc"
	MetricLoRARequests    = "vllm:lora_requests_info"
	MetricCacheConfig     = "vllm:cache_config_info"
)

// collector reads the engine at scrape time, so a scrape always shows the
// state of one instant and never a stale gauge.
type collector struct {
	eng   *engine
	model string

	maxLoRA, blockSize, numGPUBlocks string

	running, waiting, kvUsage, loraInfo, cacheConfig *prometheus.Desc
}

var _ prometheus.Collector = (*collector)(nil)

func newCollector(cfg Config, eng *engine) *collector {
	model := []string{"model_name"}
	return &collector{
		eng:          eng,
		model:        cfg.Model,
		maxLoRA:      strconv.Itoa(cfg.MaxLoRAs),
		blockSize:    strconv.Itoa(cfg.BlockSize),
		numGPUBlocks: strconv.Itoa(cfg.NumGPUBlocks),
		running: prometheus.NewDesc(MetricRequestsRunning,
			"Number of requests currently running on GPU.", model, nil),
		waiting: prometheus.NewDesc(MetricRequestsWaiting,
			"Prometheus metric for the number of queued requests.", model, nil),
		kvUsage: prometheus.NewDesc(MetricKVCacheUsage,
			"Prometheus metric for the fraction of KV-cache blocks currently in use (from 0 to 1).", model, nil),
		loraInfo: prometheus.NewDesc(MetricLoRARequests,
			"Running stats on lora requests.",
			[]string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"}, nil),
		cacheConfig: prometheus.NewDesc(MetricCacheConfig,
			"Information of the LLMEngine CacheConfig.",
			[]string{"block_size", "num_gpu_blocks"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.waiting
	ch <- c.kvUsage
	ch <- c.loraInfo
	ch <- c.cacheConfig
}

// Collect emits one series per metric. vLLM leaves a lora_requests_info series
// behind for every adapter-set combination it has seen; this server emits only
// the current one, so a reader taking the newest timestamp reads the same
// sets, and a reader that does not cannot be misled by a stale series.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st, _ := c.eng.snapshot()
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(st.Running), c.model)
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.Waiting), c.model)
	ch <- prometheus.MustNewConstMetric(c.kvUsage, prometheus.GaugeValue, st.KVCacheUsage, c.model)
	ch <- prometheus.MustNewConstMetric(c.loraInfo, prometheus.GaugeValue, float64(st.LoRAChangedAt.Unix()),
		c.maxLoRA, strings.Join(st.RunningLoRAs, ","), strings.Join(st.WaitingLoRAs, ","))
	ch <- prometheus.MustNewConstMetric(c.cacheConfig, prometheus.GaugeValue, 1, c.blockSize, c.numGPUBlocks)
}
