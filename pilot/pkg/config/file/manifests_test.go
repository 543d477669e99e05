// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file_test

import (
	"fmt"
	"strings"
)

// pool returns an InferencePool manifest in llm-namespace with the given
// selector and target ports blocks (indented YAML, without their keys).
func pool(name, selector, ports string) string {
	return fmt.Sprintf(`apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata:
  name: %s
  namespace: llm-namespace
spec:
  selector:
%s
  targetPorts:
%s
  endpointPickerRef:
    name: epp
    port:
      number: 9002
`, name, selector, ports)
}

const (
	vllmSelector = "    matchLabels:\n      app: vllm"
	port8000     = "  - number: 8000"
)

func goodPool(name string) string { return pool(name, vllmSelector, port8000) }

// ports returns n targetPorts entries 8000, 8001, ...
func ports(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - number: %d\n", 8000+i)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func configMap(name, value string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  namespace: llm-namespace
data:
  key: %q
`, name, value)
}
