// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package vllmsim is an in-process model server for tests: it speaks the part of
// vLLM's HTTP surface that an inference gateway and its endpoint picker see, so
// end-to-end tests can run several "pods" on loopback without a GPU or a
// container image.
//
// Its one job: answer like a vLLM pod, and let a test hold, count and inspect
// the requests it serves.
//
// Inputs: a [Config] (pod name, base model, LoRA adapter names as given to
// vLLM's --model, --lora-modules and --max-loras flags, a running-request
// limit, KV-cache geometry) and HTTP requests.
//
// Outputs, per server:
//   - POST /v1/completions and POST /v1/chat/completions: OpenAI-compatible JSON,
//     or Server-Sent Events when the body has "stream": true (one
//     "data: {json}\n\n" event per generated token, then "data: [DONE]\n\n").
//     The request's "model" must be the base model or a loaded adapter (an empty
//     or missing model means the base model); anything else is 404 with vLLM's
//     error body {"error":{"message":"The model `x` does not exist.",
//     "type":"NotFoundError","param":null,"code":404}}.
//   - GET /v1/models: {"object":"list","data":[...]} with the base model first,
//     then each adapter (parent = the base model).
//   - GET /metrics: Prometheus text from the server's own registry:
//     vllm:num_requests_running, vllm:num_requests_waiting and
//     vllm:kv_cache_usage_perc (label model_name), vllm:lora_requests_info
//     (labels max_lora, running_lora_adapters, waiting_lora_adapters; value the
//     Unix time in seconds at which those adapter sets last changed) and
//     vllm:cache_config_info (labels block_size, num_gpu_blocks; value 1).
//   - every response, errors included, carries x-inference-pod (the pod name)
//     and x-inference-port (the port the request arrived on).
//
// The load model, deterministic and read by the metrics at scrape time:
//   - A request's size is its prompt tokens plus the tokens it will generate; a
//     token is one whitespace-separated word. It needs
//     ceil(size / BlockSize) KV blocks.
//   - Requests queue in arrival order (waiting) and are admitted (running) by a
//     scheduling pass that takes, in order, every waiting request that fits:
//     fewer than MaxRunning requests running (0: no limit), enough free KV
//     blocks (a request is always admitted when nothing runs), and its adapter
//     already running or fewer than MaxLoRAs distinct adapters running.
//   - vllm:kv_cache_usage_perc = blocks held by running requests / NumGPUBlocks,
//     capped at 1. Waiting requests hold no blocks.
//   - A running request is held while its x-sim-hold gate ([HoldHeader]) is
//     closed, then waits Config.Latency, then answers and leaves.
//
// Rules for callers: gates are opened with [Server.Release] and stay open;
// wait for a state with [Server.WaitUntil] (it wakes on every state change, it
// never polls); always [Server.Close] (or use [Run], which registers it), which
// fails every held or waiting request with 503 so no handler outlives the test.
//
// # Files
//
//   - config.go: Config with its defaults and validation, and ParseLoRAModules.
//   - server.go: Server, New, Run and Start: the routes, /v1/models, the last
//     request, Release and WaitUntil.
//   - engine.go: engine: the admission queue, the running set, the KV blocks
//     and the hold gates.
//   - inference.go: /v1/completions and /v1/chat/completions answered, whole or
//     streamed as Server-Sent Events.
//   - openai.go: the OpenAI-compatible request and response bodies, token
//     counting and generation.
//   - metrics.go: the collector that reads the engine at scrape time for
//     /metrics.
package vllmsim
