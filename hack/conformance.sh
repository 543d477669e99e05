#!/usr/bin/env bash
# Copyright infermesh authors
# SPDX-License-Identifier: Apache-2.0
#
# `make conformance`: the GIE v1.6.0 conformance suite against infermesh on
# this machine (conformance/README.md). Builds what it needs, then runs
# conformance/harness's TestGIEConformance (build tag "conformance"), which
# starts the cluster, the node, the load-balancer stand-in and infermesh,
# runs the suite's own test binary and tears everything down. The last line
# printed is "N passed, M failed, K skipped" (from the suite's report).
#
# Environment:
#   RUN_TEST         one test's short name, passed to the suite's -run-test
#                    (for example InferencePoolAccepted); empty runs all 14
#   SKIP_TESTS       short names, comma-separated, passed to the suite's
#                    -skip-tests (`make conformance-subset` sets it)
#   EPP_BODY_MODE    the GatewayClass's eppRequestBodyMode: Streamed (default),
#                    FullDuplexStreamed, or "default" (a class without
#                    parametersRef: FULL_DUPLEX_STREAMED, as on Istio)
#   REPORT           the report YAML (default conformance/reports/v1.6.0/infermesh-<RUN_TEST or all>.yaml)
#   CONFORMANCE_TEST the harness test to run (default TestGIEConformance;
#                    TestClusterSmoke checks the cluster and node alone)
#   GO               go command (default go)
# Needs root (network namespaces, a bridge). Logs stay in the state folder
# it prints (pod logs under node/logs/).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
RUN_TEST=${RUN_TEST:-}
SKIP_TESTS=${SKIP_TESTS:-}
EPP_BODY_MODE=${EPP_BODY_MODE:-Streamed}
CONFORMANCE_TEST=${CONFORMANCE_TEST:-TestGIEConformance}
GIE_CONFORMANCE_VERSION=${GIE_CONFORMANCE_VERSION:-v1.6.0}
REPORT=${REPORT:-conformance/reports/$GIE_CONFORMANCE_VERSION/infermesh-${RUN_TEST:-all}.yaml}
[[ $REPORT == /* ]] || REPORT=$PWD/$REPORT
CACHE_ROOT=${INFERMESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infermesh}

log() { printf '==> conformance: %s\n' "$*" >&2; }
[[ $(id -u) == 0 ]] || { echo "conformance: needs root (network namespaces)" >&2; exit 1; }

start=$SECONDS
k8s=$(hack/k8s-test-binaries.sh)
images=$(GIE_CONFORMANCE_VERSION=$GIE_CONFORMANCE_VERSION hack/images.sh)
suite=$CACHE_ROOT/images/gie-conformance.test-$GIE_CONFORMANCE_VERSION/bin/gie-conformance.test
[[ -x $suite ]] || { echo "conformance: hack/images.sh left no $suite" >&2; exit 1; }
log "binaries ready in $((SECONDS - start)) s"

state=$(mktemp -d "${TMPDIR:-/tmp}/infermesh-conformance.XXXXXX")
mkdir -p "$(dirname "$REPORT")"
rm -f "$REPORT"
summary=$state/summary
log "state and logs in $state"

rc=0
KUBE_TEST_BINARIES=$k8s/bin \
	CONFORMANCE_IMAGES=$images CONFORMANCE_SUITE=$suite CONFORMANCE_RUN_TEST=$RUN_TEST \
	CONFORMANCE_SKIP_TESTS=$SKIP_TESTS CONFORMANCE_EPP_BODY_MODE=$EPP_BODY_MODE \
	CONFORMANCE_REPORT=$REPORT CONFORMANCE_SUMMARY=$summary CONFORMANCE_STATE=$state \
	"$GO" test -tags=conformance -count=1 -timeout 0 -v -run "^${CONFORMANCE_TEST}\$" ./conformance/harness/ || rc=$?
log "logs in $state; report ${REPORT}; took $((SECONDS - start)) s"
if [[ $CONFORMANCE_TEST != TestGIEConformance ]]; then
	exit "$rc"
elif [[ -s $summary ]]; then
	cat "$summary"
else
	echo "0 passed, 0 failed, 0 skipped (no agreed result: the suite wrote no report, or its report disagrees with Go's verdicts; see the output above)"
	[[ $rc != 0 ]] || rc=1
fi
exit "$rc"
