// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"testing"
)

// The documents of hack/gen-pools.sh's folder, one of each kind.
const (
	benchPod = `apiVersion: v1
kind: Pod
metadata:
  name: pool-0001-3
  namespace: llm-namespace
  labels:
    app: pool-0001
spec:
  containers:
  - name: vllm
    image: example.invalid/vllm
status:
  phase: Running
  podIP: 10.100.1.4
  conditions:
  - type: Ready
    status: "True"
`
	benchPool = `apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata:
  name: pool-0001
  namespace: llm-namespace
spec:
  selector:
    matchLabels:
      app: pool-0001
  targetPorts:
  - number: 8000
  endpointPickerRef:
    name: vllm-llama3-8b-epp
    port:
      number: 9002
    failureMode: FailOpen
`
	benchRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: pool-0001
  namespace: llm-namespace
spec:
  parentRefs:
  - name: gateway
    namespace: gateway-namespace
  hostnames:
  - "pool-0001.example.com"
  rules:
  - backendRefs:
    - group: inference.networking.k8s.io
      kind: InferencePool
      name: pool-0001
`
)

// BenchmarkDecodeDocument is the cost of decoding and validating one
// document of each kind hack/gen-pools.sh writes (a folder of N pools holds
// N InferencePools, N HTTPRoutes and 10N Pods).
func BenchmarkDecodeDocument(b *testing.B) {
	crds, err := embeddedCRDs()
	if err != nil {
		b.Fatal(err)
	}
	s := &Source{dec: &decoder{crds: crds}}
	for _, c := range []struct{ name, text string }{{"Pod", benchPod}, {"InferencePool", benchPool}, {"HTTPRoute", benchRoute}} {
		b.Run(c.name, func(b *testing.B) {
			d := document{line: 1, body: []byte(c.text)}
			if fd := s.decodeDocument("f.yaml", d); len(fd.problems) > 0 || len(fd.objects) != 1 {
				b.Fatalf("%v", fd.problems)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.decodeDocument("f.yaml", d)
			}
		})
	}
}
