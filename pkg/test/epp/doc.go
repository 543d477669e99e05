// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package epp runs a real GIE endpoint picker (EPP) as a child process for a
// test: the lightweight picker [LWEPP] (GIE v1.6.2 cmd/lwepp, round robin over
// the pool's ready pods; the image the seed's and the GIE conformance suite's
// manifests name) or the full, metrics-aware one [FullEPP] (GIE v1.0.0
// cmd/epp, which scrapes http://podIP:targetPorts[0]/metrics).
//
// Its one job: start an EPP against a kubeenv cluster, say when it is ready,
// and take it away afterwards.
//
// Inputs: the binaries, found only in $EPP_TEST_BINARIES (a folder holding
// lwepp and epp), which hack/epp-binaries.sh builds from the Go module proxy
// at [LWEPPVersion] and [FullEPPVersion] and prints (a folder named for that
// pair); [Binary] fails the test (never skips) when one is missing, or when
// its build record (VERSIONS, which the script writes beside the binary's
// bin folder) names another GIE release, naming the script. A [Config]: the
// kind, a kubeconfig file (kubeenv's Env.Kubeconfig), the InferencePool's
// namespace and name, the ext_proc gRPC port (0 picks a free one), plaintext
// or TLS, and extra flags.
//
// Outputs: a [Process] whose ext_proc server answers at [Process.Addr]
// (127.0.0.1:port), and whose combined stdout and stderr are kept in memory
// ([Process.Logs]) and attached to the test output when the test fails.
//
// What Start passes (see args.go for the exact flags of each version): the
// pool flags, the gRPC, gRPC-health and metrics ports (each a free port, so
// processes started at once do not clash; both EPPs bind all interfaces),
// --secure-serving (TLS with the EPP's own self-signed certificate and ALPN h2,
// as the seed's DestinationRule with insecureSkipVerify expects), the
// kubeconfig through KUBECONFIG, which controller-runtime reads; for the full
// EPP also the scheduler configuration of the GIE v1.0.0 manifests (queue,
// KV-cache-utilization and prefix-cache scorers, given as --config-text; it
// exits without one) and --kv-cache-usage-percentage-metric=vllm:kv_cache_usage_perc,
// the name current vLLM servers (and pkg/test/vllmsim) export; its default,
// vllm:gpu_cache_usage_perc, is the old one.
//
// Readiness: [Start] returns once the ext_proc port accepts TCP connections and
// the EPP's gRPC health server (on its own port) answers SERVING, which both
// versions do only after their InferencePool informer has synced the pool. It
// does not wait for pods: the first picks may still answer Unavailable until
// the pod informer has caught up (and, for the full EPP, until it has scraped
// the pods' metrics). Bound such waits in the test.
//
// Rules for callers:
//   - The cluster must hold the InferencePool CRD, and for the full EPP also the
//     InferenceObjective CRD (kubeenv.InferenceObjectiveCRD), before Start; the
//     pool itself must exist for readiness.
//   - Call Start, Stop and Restart from the test goroutine. Start registers a
//     t.Cleanup that kills the whole process group (SIGTERM, then SIGKILL after
//     5 s); the child is also killed by the kernel if the test binary dies.
//   - The process runs with niceness at least 10, so it yields to the cluster
//     and the test on a 2-core machine.
//
// # Files
//
//   - binary.go: Kind and Binary, the EPP binaries found in $EPP_TEST_BINARIES,
//     each checked against its build record.
//   - process.go: Config, Start and Process: one EPP child process with Stop,
//     Restart and cleanup.
//   - args.go: each EPP version's command line and environment.
//   - ready.go: readiness: the ext_proc port accepting and the health service
//     SERVING.
//   - dial.go: Process.Dial, a gRPC connection to the ext_proc server.
//   - logbuffer.go: logBuffer, the child's output kept up to a bound.
package epp
