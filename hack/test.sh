#!/usr/bin/env bash
# Copyright infermesh authors
# SPDX-License-Identifier: Apache-2.0
#
# `make test`: every check CI runs (.ci/run calls `make test`): lint, unit
# tests, then the integration suites. The integration suites need binaries
# that are built once per machine and cached (hack/k8s-test-binaries.sh:
# kube-apiserver, kube-controller-manager, etcd; hack/epp-binaries.sh: the
# endpoint pickers). On a fresh machine those builds take about 20 minutes
# of the CI budget, so they start in the background at once and overlap
# lint and unit (which leave cores idle while tests sleep or link); the
# suites that need no endpoint picker run while the picker build finishes.
# With the caches warm both scripts return in a fraction of a second.
#
# Output: lint and test output as `make lint unit` and `go test` print it;
# each background build's log is printed when it is waited for. Exit status:
# non-zero on the first failure; background builds are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

start=$SECONDS
# step NAME: print how long the run has taken so far (CI logs show where the
# budget goes).
step() { echo "==> hack/test.sh: $1 at $((SECONDS - start)) s" >&2; }

logs=$(mktemp -d)
set -m # background jobs get their own process group, so they can be stopped whole
hack/k8s-test-binaries.sh >"$logs/k8s.out" 2>"$logs/k8s.log" &
k8s_pid=$!
hack/epp-binaries.sh >"$logs/epp.out" 2>"$logs/epp.log" &
epp_pid=$!
set +m
cleanup() {
	for pid in $k8s_pid $epp_pid; do
		kill -- -"$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$logs"
}
trap cleanup EXIT

# finish NAME PID: wait for a background build and print its log; exit on
# failure.
finish() {
	local rc=0
	wait "$2" || rc=$?
	sed "s/^/[$1] /" "$logs/$1.log" >&2
	if [ "$rc" -ne 0 ]; then
		echo "hack/test.sh: building the $1 binaries failed (exit $rc)" >&2
		exit "$rc"
	fi
}

make lint unit GO="$GO"
step "lint and unit done"

finish k8s "$k8s_pid"
step "Kubernetes binaries ready"
kube_bin=$(cat "$logs/k8s.out")/bin

# Integration packages, one at a time (they share pod addresses in their
# network namespaces); those that need no endpoint picker first.
epp_pkgs=(./tests/integration/epp ./tests/integration/pilot/gie)
mapfile -t all < <($GO list -tags=integ ./tests/...)
others=()
for p in "${all[@]}"; do
	case "$p" in
	*/tests/integration/epp | */tests/integration/pilot/gie) ;;
	*) others+=("$p") ;;
	esac
done
KUBE_TEST_BINARIES=$kube_bin $GO test -tags=integ -p 1 -timeout 30m -count=1 "${others[@]}"
step "integration suites without endpoint pickers done"

finish epp "$epp_pid"
step "endpoint picker binaries ready"
KUBE_TEST_BINARIES=$kube_bin EPP_TEST_BINARIES=$(cat "$logs/epp.out") \
	$GO test -tags=integ -p 1 -timeout 30m -count=1 "${epp_pkgs[@]}"
step "all done"
