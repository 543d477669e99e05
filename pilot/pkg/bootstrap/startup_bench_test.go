// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package bootstrap

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/test/cputime"
)

// BenchmarkFileModeStart is file mode's start-up (architecture/filemode.md), in
// process: from reading the folder (file.New) to the first publish
// (xds.Server.Ready), what pilot-discovery discovery -f DIR does before
// /ready answers 200. The folder is hack/gen-pools.sh's: the seed's
// Gateway and N pools, each an InferencePool, an HTTPRoute and 10 ready
// Pods. Benchmarks are not part of make test; compare runs with benchstat:
//
//	go test -run '^$' -bench FileModeStart -benchtime 1x -count 6 ./pilot/pkg/bootstrap/
func BenchmarkFileModeStart(b *testing.B) {
	for _, pools := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("pools=%d", pools), func(b *testing.B) {
			dir := b.TempDir()
			writePools(b, dir, pools, 10)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.Process(b)
			for range b.N {
				startFileMode(b, dir, log)
			}
			// CPU time (all goroutines, the collector's included) says what
			// the work costs on a machine whose other load skews sec/op.
			b.ReportMetric((cputime.Process(b)-cpu0).Seconds()/float64(b.N), "cpu-sec/op")
		})
	}
}

// startFileMode builds and runs file mode over dir until its first publish,
// then stops it.
func startFileMode(b *testing.B, dir string, log *slog.Logger) {
	src, err := file.New(dir, file.Options{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewServer(Args{
		Files: src, Features: features.Defaults(),
		Debounce: xds.DefaultDebounce, MaxDelay: xds.DefaultMaxDelay, XDSLogger: log,
	})
	if err != nil {
		b.Fatal(err)
	}
	ads, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ads, nil, nil) }()
	for !s.XDS().Ready() {
		select {
		case err := <-done:
			b.Fatalf("stopped before the first publish: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}

// writePools writes what hack/gen-pools.sh DIR N PODS writes.
func writePools(b *testing.B, dir string, n, pods int) {
	seed := filepath.Join("..", "..", "..", "examples", "seed")
	for _, f := range []string{"00-namespaces.yaml", "20-endpoint-picker.yaml", "40-gateway.yaml"} {
		data, err := os.ReadFile(filepath.Join(seed, f))
		if err != nil {
			b.Fatal(err)
		}
		write(b, filepath.Join(dir, f), string(data))
	}
	write(b, filepath.Join(dir, "file-mode", "epp-pod.yaml"), `apiVersion: v1
kind: Pod
metadata:
  name: vllm-llama3-8b-epp-0
  namespace: llm-namespace
  labels:
    app: vllm-llama3-8b-epp
spec:
  containers:
  - name: lwepp
    image: example.invalid/lwepp
status:
  phase: Running
  podIP: 10.244.0.16
  conditions:
  - type: Ready
    status: "True"
`)
	var pools, podDocs strings.Builder
	for i := range n {
		p := fmt.Sprintf("pool-%04d", i)
		fmt.Fprintf(&pools, `---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata:
  name: %[1]s
  namespace: llm-namespace
spec:
  selector:
    matchLabels:
      app: %[1]s
  targetPorts:
  - number: 8000
  endpointPickerRef:
    name: vllm-llama3-8b-epp
    port:
      number: 9002
    failureMode: FailOpen
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: %[1]s
  namespace: llm-namespace
spec:
  parentRefs:
  - name: gateway
    namespace: gateway-namespace
  hostnames:
  - "%[1]s.example.com"
  rules:
  - backendRefs:
    - group: inference.networking.k8s.io
      kind: InferencePool
      name: %[1]s
`, p)
		for j := range pods {
			fmt.Fprintf(&podDocs, `---
apiVersion: v1
kind: Pod
metadata:
  name: %s-%d
  namespace: llm-namespace
  labels:
    app: %s
spec:
  containers:
  - name: vllm
    image: example.invalid/vllm
status:
  phase: Running
  podIP: 10.%d.%d.%d
  conditions:
  - type: Ready
    status: "True"
`, p, j, p, 100+i/250, i%250, j+1)
		}
	}
	write(b, filepath.Join(dir, "pools.yaml"), pools.String())
	write(b, filepath.Join(dir, "file-mode", "pods.yaml"), podDocs.String())
}

func write(b *testing.B, path, text string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
}
