// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults applied by [New] to zero fields of a [Config].
const (
	DefaultMaxLoRAs     = 1    // vLLM's --max-loras default
	DefaultBlockSize    = 16   // tokens per KV-cache block, as in the seed's cache_config_info
	DefaultNumGPUBlocks = 1024 // KV-cache blocks, as in the seed's cache_config_info
	DefaultOutputTokens = 8    // tokens generated per request when max_tokens does not ask for fewer
)

// Config describes one simulated model-server pod.
type Config struct {
	// PodName is sent in every response's x-inference-pod header. Required.
	PodName string
	// Model is the base model name (vLLM's --model); it is also the model_name
	// label of the metrics. Required.
	Model string
	// LoRAs are the loaded adapter names (the "name" of each --lora-modules
	// entry; see [ParseLoRAModules]). Unique, and none equal to Model.
	LoRAs []string
	// MaxLoRAs is the number of distinct adapters that may run at once (vLLM's
	// --max-loras) and the max_lora label. 0 means [DefaultMaxLoRAs].
	MaxLoRAs int
	// MaxRunning is the number of requests that may run at once; later ones
	// wait. 0 means no limit.
	MaxRunning int
	// BlockSize is the number of tokens per KV-cache block. 0 means
	// [DefaultBlockSize].
	BlockSize int
	// NumGPUBlocks is the KV-cache capacity in blocks. 0 means
	// [DefaultNumGPUBlocks].
	NumGPUBlocks int
	// OutputTokens is the number of tokens a request generates unless its
	// max_tokens (or max_completion_tokens) is smaller. 0 means
	// [DefaultOutputTokens].
	OutputTokens int
	// Latency is how long a running request waits, after its hold gate opens,
	// before answering. 0 means no wait. Prefer hold gates in tests: they need
	// no clock.
	Latency time.Duration
	// Port is the x-inference-port value when the server is used as a plain
	// http.Handler whose requests carry no local address. Otherwise the port
	// the request arrived on is used.
	Port int
	// Now is the clock for "created" fields and the lora_requests_info
	// timestamp. nil means time.Now.
	Now func() time.Time
}

// Validate reports the first problem with c, after defaults are applied.
func (c Config) Validate() error {
	if c.PodName == "" {
		return errors.New("vllmsim: Config.PodName is required")
	}
	if c.Model == "" {
		return errors.New("vllmsim: Config.Model is required")
	}
	seen := map[string]bool{}
	for _, l := range c.LoRAs {
		switch {
		case l == "":
			return errors.New("vllmsim: empty LoRA adapter name")
		case l == c.Model:
			return fmt.Errorf("vllmsim: LoRA adapter %q has the base model's name", l)
		case seen[l]:
			return fmt.Errorf("vllmsim: LoRA adapter %q listed twice", l)
		}
		seen[l] = true
	}
	for name, v := range map[string]int{
		"MaxLoRAs": c.MaxLoRAs, "MaxRunning": c.MaxRunning, "BlockSize": c.BlockSize,
		"NumGPUBlocks": c.NumGPUBlocks, "OutputTokens": c.OutputTokens, "Port": c.Port,
	} {
		if v < 0 {
			return fmt.Errorf("vllmsim: Config.%s is negative (%d)", name, v)
		}
	}
	if c.Latency < 0 {
		return fmt.Errorf("vllmsim: Config.Latency is negative (%v)", c.Latency)
	}
	return nil
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.MaxLoRAs == 0 {
		c.MaxLoRAs = DefaultMaxLoRAs
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.NumGPUBlocks == 0 {
		c.NumGPUBlocks = DefaultNumGPUBlocks
	}
	if c.OutputTokens == 0 {
		c.OutputTokens = DefaultOutputTokens
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.LoRAs = append([]string(nil), c.LoRAs...)
	return c
}

// ParseLoRAModules turns vLLM --lora-modules values into adapter names. Each
// value is either JSON ({"name": "reviews-1", "path": "..."}; only name is
// required) or the older name=path form.
func ParseLoRAModules(values ...string) ([]string, error) {
	var names []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, "{") {
			var m struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal([]byte(v), &m); err != nil {
				return nil, fmt.Errorf("vllmsim: --lora-modules %q: %w", v, err)
			}
			if m.Name == "" {
				return nil, fmt.Errorf("vllmsim: --lora-modules %q: no name", v)
			}
			names = append(names, m.Name)
			continue
		}
		name, _, _ := strings.Cut(v, "=")
		if name == "" {
			return nil, fmt.Errorf("vllmsim: --lora-modules %q: no name", v)
		}
		names = append(names, name)
	}
	return names, nil
}
