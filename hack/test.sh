#!/usr/bin/env bash
# Copyright infermesh authors
# SPDX-License-Identifier: Apache-2.0
#
# `make test`: every check CI runs (.ci/run calls `make test`): vet and
# gofmt, the unit tests under the race detector, staticcheck, the
# integration suites, and the conformance suites (`make conformance-subset`,
# conformance/README.md): the GIE suite but one statistical test, then the
# whole Gateway API suite.
#
# Scheduled for the 2-core CI budget (architecture/ci.md). On a fresh
# machine almost all of the work is compiling, and the integration suites
# mostly wait on the processes they start. So:
#   - the binaries the suites need, built once per machine and cached
#     (hack/k8s-test-binaries.sh: kube-apiserver, kube-controller-manager,
#     kube-scheduler, etcd; hack/epp-binaries.sh: the endpoint pickers,
#     then hack/images.sh for each suite: the binaries the conformance
#     node runs as images, which reuses lwepp; hack/bbr-binaries.sh: GIE's
#     body-based router, after the EPPs, whose GIE v1.0.0 packages it
#     reuses; hack/extauthz-binary.sh: the authorization server of the
#     ExternalAuth test), start building
#     in the background at once; hack/helm.sh (helm, built inside this module)
#     after vet;
#   - vet, gofmt and the unit tests run in the foreground meanwhile;
#   - staticcheck runs beside the integration suites, filling the cores
#     they leave idle;
#   - the integration packages run two at a time;
#   - the conformance suites run last, alone, one after the other: each
#     starts a cluster, a node and every pod of its suite, and needs the
#     cores to itself.
# With the caches warm both build scripts return in a fraction of a second.
#
# Output: each step's output as make and go test print it; background logs
# (the builds', staticcheck's) are printed when waited for; "==> hack/test.sh:"
# lines give the elapsed time. Exit status: non-zero if any step failed;
# background work is stopped when the script exits.
set -euo pipefail
# Go 1.27 (Gateway API v1.7.0 needs it): the toolchain the module proxy
# serves, fetched by the go command on first use (README).
export GOTOOLCHAIN=go1.27.3
cd "$(dirname "$0")/.."
GO=${GO:-go}

start=$SECONDS
step() { echo "==> hack/test.sh: $1 at $((SECONDS - start)) s" >&2; }

logs=$(mktemp -d)
pids=()
# background NAME CMD...: run CMD in its own process group (so it can be
# stopped whole), stdout to $logs/NAME.out, stderr to $logs/NAME.log.
background() {
	local name=$1
	shift
	set -m
	"$@" >"$logs/$name.out" 2>"$logs/$name.log" &
	set +m
	pids+=($!)
	eval "${name}_pid=$!"
}
cleanup() {
	for pid in "${pids[@]}"; do
		kill -- -"$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$logs"
}
trap cleanup EXIT

# finish NAME: wait for a background job, print its output; returns its
# exit status.
finish() {
	local pid_var="$1_pid" rc=0
	wait "${!pid_var}" || rc=$?
	sed "s/^/[$1] /" "$logs/$1.log" >&2
	if [ "$rc" -ne 0 ]; then
		echo "hack/test.sh: $1 failed (exit $rc)" >&2
	fi
	return "$rc"
}

background k8s hack/k8s-test-binaries.sh
# images.sh after epp-binaries.sh, never beside it: both would build lwepp
# into the same cache folder. The body-based router between them: it is
# built from GIE v1.0.0 like the full EPP, so it finds those packages
# compiled. Then the Gateway API suite's images (its test binary).
background epp bash -c 'hack/epp-binaries.sh && hack/bbr-binaries.sh && hack/images.sh && SUITE=gateway-api hack/images.sh'
# The ExternalAuth test's authorization server (Istio's sample ext_authz):
# a small build of its own module, about a minute of CPU cold.
background authz hack/extauthz-binary.sh

make vet GO="$GO"
step "vet and gofmt done"
# helm is built inside this module (hack/helm.sh): after vet, it finds the
# packages it shares with this module (client-go, apimachinery, ...)
# compiled, where beside vet both would compile them at once.
background helm hack/helm.sh

make unit GO="$GO"
step "unit tests done"

finish k8s
finish epp
finish authz
finish helm
step "integration binaries ready"

# staticcheck (make staticcheck) prints its findings on stdout.
background staticcheck make staticcheck GO="$GO"

# make integ runs both build scripts again (they now reuse what was built,
# in a fraction of a second) for the binaries' folders, then the suites.
integ_rc=0
make integ GO="$GO" || integ_rc=$?
step "integration suites done"

sc_rc=0
finish staticcheck || sc_rc=$?
if [ -s "$logs/staticcheck.out" ]; then
	cat "$logs/staticcheck.out"
fi
step "staticcheck done"

conf_rc=0
make conformance-subset GO="$GO" || conf_rc=$?
step "conformance suites done"

if [ "$integ_rc" -ne 0 ] || [ "$sc_rc" -ne 0 ] || [ "$conf_rc" -ne 0 ]; then
	echo "hack/test.sh: FAILED (integration suites exit $integ_rc, staticcheck exit $sc_rc, conformance suites exit $conf_rc)" >&2
	exit 1
fi
step "all passed"
