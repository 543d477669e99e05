#!/usr/bin/env bash
# Copyright infermesh authors
# SPDX-License-Identifier: Apache-2.0
#
# The main job (`make demo`): run pilot-discovery in file mode on the seed's
# manifests, connect to its ADS port as the seed Gateway's Envoy would, print
# what that Envoy receives (routes, clusters, endpoints, and the route with
# its ext_proc override as Envoy JSON) and the InferencePool status the
# controller computes, then stop it.
#
# Usage: hack/demo.sh [PILOT_DISCOVERY_BINARY] [MANIFEST_DIR]
set -euo pipefail

bin=${1:-out/pilot-discovery}
dir=${2:-examples/seed}
gateway=gateway-namespace/gateway
export ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true

log=$(mktemp)
pid=
cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		wait "$pid" || true
	fi
	rm -f "$log"
}
trap cleanup EXIT

# Loopback only, on ports the kernel picks; ADS in plaintext is fine there.
"$bin" discovery -f "$dir" --plaintext --ads-address 127.0.0.1:0 --http-address 127.0.0.1:0 --debug-address 127.0.0.1:0 2>"$log" &
pid=$!

# The start line carries the bound addresses; wait for it (at most 60 s).
ads=
for _ in $(seq 600); do
	ads=$(grep -o '"ads":"[^"]*"' "$log" | head -n1 | cut -d'"' -f4 || true)
	[[ -n $ads ]] && break
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "pilot-discovery exited early:" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.1
done
if [[ -z $ads ]]; then
	echo "pilot-discovery did not start within 60 s:" >&2
	cat "$log" >&2
	exit 1
fi

section() { printf '\n== %s\n' "$*"; }
section "pilot-discovery discovery -f $dir: ADS on $ads (plaintext, loopback)"
# Manifests the API server would reject are logged and left out; show them.
grep '"msg":"file: manifest rejected"' "$log" || true
for kind in routes clusters endpoints; do
	section "proxy-config $kind --gateway $gateway"
	"$bin" proxy-config "$kind" --gateway "$gateway" --xds-address "$ads" --plaintext
done
section "proxy-config routes --gateway $gateway --name http.80 -o json (the ext_proc override to the EPP)"
"$bin" proxy-config routes --gateway "$gateway" --xds-address "$ads" --plaintext --name http.80 -o json
section "status -f $dir (what the controller would write; nothing is written)"
"$bin" status -f "$dir"

# Point to the demo that routes the request (hack/demo-traffic.sh runs this
# script itself where it cannot, and sets DEMO_TRAFFIC_UNAVAILABLE).
if [[ -z ${DEMO_TRAFFIC_UNAVAILABLE:-} ]]; then
	printf '\n%s\n%s\n' "That is what the seed Gateway's Envoy would receive. To see the seed's request routed to the pod" \
		"the endpoint picker chose (a real API server, the EPP, model-server pods): make demo-traffic (README.md)."
fi
