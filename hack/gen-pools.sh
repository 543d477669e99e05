#!/usr/bin/env bash
# Copyright infermesh authors
# SPDX-License-Identifier: Apache-2.0
#
# Writes a file-mode folder with N InferencePools for resource measurements:
# the seed's namespaces, Gateway, EPP Service, DestinationRule and EPP pod,
# and per pool an InferencePool, an HTTPRoute (host pool-I.example.com) and
# PODS ready model-server pods.
#
# Usage: hack/gen-pools.sh DIR [N=1000] [PODS=10]
set -euo pipefail
dir=${1:?usage: hack/gen-pools.sh DIR [N] [PODS]}
n=${2:-1000}
pods=${3:-10}
mkdir -p "$dir/file-mode"
cp examples/seed/00-namespaces.yaml examples/seed/20-endpoint-picker.yaml examples/seed/40-gateway.yaml "$dir/"
cat >"$dir/file-mode/epp-pod.yaml" <<'YAML'
apiVersion: v1
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
YAML
{
	for ((i = 0; i < n; i++)); do
		p=$(printf 'pool-%04d' "$i")
		cat <<YAML
---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata:
  name: $p
  namespace: llm-namespace
spec:
  selector:
    matchLabels:
      app: $p
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
  name: $p
  namespace: llm-namespace
spec:
  parentRefs:
  - name: gateway
    namespace: gateway-namespace
  hostnames:
  - "$p.example.com"
  rules:
  - backendRefs:
    - group: inference.networking.k8s.io
      kind: InferencePool
      name: $p
YAML
	done
} >"$dir/pools.yaml"
{
	for ((i = 0; i < n; i++)); do
		p=$(printf 'pool-%04d' "$i")
		for ((j = 0; j < pods; j++)); do
			cat <<YAML
---
apiVersion: v1
kind: Pod
metadata:
  name: $p-$j
  namespace: llm-namespace
  labels:
    app: $p
spec:
  containers:
  - name: vllm
    image: example.invalid/vllm
status:
  phase: Running
  podIP: 10.$((100 + i / 250)).$((i % 250)).$((j + 1))
  conditions:
  - type: Ready
    status: "True"
YAML
		done
	done
} >"$dir/file-mode/pods.yaml"
echo "$dir: $n pools, $((n * pods)) pods" >&2
