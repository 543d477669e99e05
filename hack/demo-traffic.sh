#!/usr/bin/env bash
# Copyright infermesh authors
# SPDX-License-Identifier: Apache-2.0
#
# `make demo-traffic`: the seed's request sent through the seed Gateway's
# data plane and answered by the pod the endpoint picker chose, on this
# machine (demo/traffic/doc.go says what runs). It builds or reuses the
# cached Kubernetes binaries (hack/k8s-test-binaries.sh) and endpoint
# pickers (hack/epp-binaries.sh), builds the demo and runs it.
#
# It needs network namespaces (root and iproute2). Where they cannot be
# made (not root, or a user namespace such as `unshare -U`), it says so,
# prints the configuration part alone (`make demo`, hack/demo.sh) and
# exits 0: nothing that looks like routing but is not.
#
# Usage: hack/demo-traffic.sh [PILOT_DISCOVERY_BINARY]
# Environment: GO (default go), ENVOY_BINARY (a real Envoy for the data plane).
set -euo pipefail
# Go 1.27 (Gateway API v1.7.0 needs it): the toolchain the module proxy
# serves, fetched by the go command on first use (README).
export GOTOOLCHAIN=go1.27.3
cd "$(dirname "$0")/.."
GO=${GO:-go}
bin=${1:-out/pilot-discovery}
start=$SECONDS

# Checked before any build: an unprivileged machine needs none of them.
why=
if [[ $(id -u) != 0 ]]; then
	why="not root (uid $(id -u))"
elif ! ip=$(command -v ip || ls /usr/sbin/ip /sbin/ip 2>/dev/null | head -n1) || [[ -z $ip ]]; then
	why="no ip command (iproute2)"
else
	probe=imdemo-probe-$$
	if out=$(setsid "$ip" netns add "$probe" 2>&1); then
		setsid "$ip" netns del "$probe"
	else
		why="\`ip netns add\` fails here: $out"
	fi
fi
if [[ -n $why ]]; then
	cat <<-MSG
	demo-traffic: this machine cannot make network namespaces ($why),
	so no request is routed here. It needs root and iproute2 (a container
	needs CAP_SYS_ADMIN and CAP_NET_ADMIN). What follows is the configuration
	part alone, as \`make demo\` prints it: what the seed Gateway's Envoy would receive.

	MSG
	if [[ ! -x $bin ]]; then
		"$GO" build -o "$bin" ./pilot/cmd/pilot-discovery
	fi
	DEMO_TRAFFIC_UNAVAILABLE=1 hack/demo.sh "$bin" examples/seed
	exit 0
fi

k8s=$(hack/k8s-test-binaries.sh)
eppbin=$(hack/epp-binaries.sh)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infermesh-demo-traffic.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/demo-traffic" ./demo/traffic/cmd/demo-traffic
ready=$((SECONDS - start))
echo "demo-traffic: binaries ready in ${ready} s (cached after the first run)"
echo
rc=0
KUBE_TEST_BINARIES=$k8s/bin EPP_TEST_BINARIES=$eppbin "$tmp/demo-traffic" -repo "$PWD" || rc=$?
echo "demo-traffic: took $((SECONDS - start)) s in all"
exit "$rc"
