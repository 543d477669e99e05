// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package epp

import (
	"strconv"
	"strings"
)

// KVCacheUsageMetric is the KV-cache usage gauge that vLLM servers (and
// pkg/test/vllmsim) export. The full EPP v1.0.0 defaults to the older name
// vllm:gpu_cache_usage_perc, so Start passes this one.
const KVCacheUsageMetric = "vllm:kv_cache_usage_perc"

// FullEPPSchedulerConfig is the scheduler configuration Start gives the full
// EPP (--config-text): the default-plugins.yaml of GIE v1.0.0's
// config/manifests/inferencepool-resources.yaml. The loader adds the
// single-profile handler and the max-score picker. Without any configuration
// v1.0.0 exits with "scheduler config must be set".
const FullEPPSchedulerConfig = `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
  - pluginRef: kv-cache-utilization-scorer
  - pluginRef: prefix-cache-scorer
`

// ports are the three ports an EPP listens on (all interfaces).
type ports struct {
	grpc, health, metrics int
}

// args returns the command line for cfg's kind on ports. ExtraArgs come last,
// so a test may override any flag (both flag parsers keep the last value).
//
// Flags shared by lwepp v1.6.2 (pflag) and epp v1.0.0 (Go flag):
// --pool-name, --pool-namespace (lwepp has no default: empty would watch
// every namespace), --grpc-port (ext_proc), --grpc-health-port (a separate
// gRPC server with the health service), --metrics-port (controller-runtime's
// metrics server), --secure-serving (default true: TLS with a self-signed
// certificate, ALPN h2). The kubeconfig goes through KUBECONFIG (childEnv).
func args(cfg Config, p ports) []string {
	a := []string{
		"--pool-namespace=" + cfg.PoolNamespace,
		"--pool-name=" + cfg.PoolName,
		"--grpc-port=" + strconv.Itoa(p.grpc),
		"--grpc-health-port=" + strconv.Itoa(p.health),
		"--metrics-port=" + strconv.Itoa(p.metrics),
		"--secure-serving=" + strconv.FormatBool(cfg.TLS),
	}
	if cfg.Kind == FullEPP {
		a = append(a,
			"--config-text="+FullEPPSchedulerConfig,
			"--kv-cache-usage-percentage-metric="+KVCacheUsageMetric,
			// pprof handlers on the metrics port: nothing a test reads.
			"--enable-pprof=false",
		)
	}
	return append(a, cfg.ExtraArgs...)
}

// childEnv returns the child's environment: base (the test's) with KUBECONFIG set to
// cfg.Kubeconfig, which controller-runtime's config loader reads when no
// --kubeconfig flag is given.
func childEnv(base []string, cfg Config) []string {
	out := make([]string, 0, len(base)+1)
	for _, kv := range base {
		if strings.HasPrefix(kv, "KUBECONFIG=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "KUBECONFIG="+cfg.Kubeconfig)
}
