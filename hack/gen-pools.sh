#!/usr/bin/env bash
# Copyright infermesh authors
# SPDX-License-Identifier: Apache-2.0
#
# Writes a file-mode folder with N InferencePools for resource measurements:
# the seed's namespaces, Gateway, EPP Service, DestinationRule and EPP pod,
# and per pool an InferencePool, an HTTPRoute (host pool-I.example.com) and
# PODS ready model-server pods.
#
# GATEWAYS > 1 spreads the routes over that many Gateways of the seed's
# shape in gateway-namespace: the seed's "gateway" and gateway-1 ..
# gateway-(GATEWAYS-1) (41-gateways.yaml); route I attaches to Gateway
# I % GATEWAYS. With GATEWAYS = 1 (the default) the folder is the same as
# without the argument.
#
# Usage: hack/gen-pools.sh DIR [N=1000] [PODS=10] [GATEWAYS=1]
set -euo pipefail
dir=${1:?usage: hack/gen-pools.sh DIR [N] [PODS] [GATEWAYS]}
n=${2:-1000}
pods=${3:-10}
gateways=${4:-1}
if ((gateways < 1)); then
	echo "gen-pools.sh: GATEWAYS must be at least 1, got $gateways" >&2
	exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$dir/file-mode"
cp "$here"/examples/seed/00-namespaces.yaml "$here"/examples/seed/20-endpoint-picker.yaml "$here"/examples/seed/40-gateway.yaml "$dir/"
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
if ((gateways > 1)); then
	for ((g = 1; g < gateways; g++)); do
		# The seed's Gateway under another name.
		printf -- '---\n'
		sed -e "/^#/d" -e "s/^  name: gateway\$/  name: gateway-$g/" "$here/examples/seed/40-gateway.yaml"
	done >"$dir/41-gateways.yaml"
fi
# The loops below use only shell builtins (printf), no process per object:
# 10,000 pools of 10 pods take seconds, not minutes.
{
	for ((i = 0; i < n; i++)); do
		printf -v p 'pool-%04d' "$i"
		gw=gateway
		if ((i % gateways != 0)); then
			gw=gateway-$((i % gateways))
		fi
		printf '%s\n' "---
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
  - name: $gw
    namespace: gateway-namespace
  hostnames:
  - \"$p.example.com\"
  rules:
  - backendRefs:
    - group: inference.networking.k8s.io
      kind: InferencePool
      name: $p"
	done
} >"$dir/pools.yaml"
{
	for ((i = 0; i < n; i++)); do
		printf -v p 'pool-%04d' "$i"
		for ((j = 0; j < pods; j++)); do
			printf '%s\n' "---
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
    status: \"True\""
		done
	done
} >"$dir/file-mode/pods.yaml"
echo "$dir: $n pools, $((n * pods)) pods, $gateways Gateway(s)" >&2
