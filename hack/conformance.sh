#!/usr/bin/env bash
# Copyright infermesh authors
# SPDX-License-Identifier: Apache-2.0
#
# `make conformance`: the conformance suites against infermesh on this
# machine (conformance/README.md): the GIE v1.6.0 suite, then the Gateway
# API v1.7.0 suite, profiles GATEWAY-HTTP, GATEWAY-GRPC, GATEWAY-TLS and GATEWAY-TCP; SUITE=gie or
# SUITE=gateway-api (`make conformance-gateway-api`) runs one. For each
# suite it builds what it needs, then runs
# conformance/harness's TestGIEConformance or TestGatewayAPIConformance
# (build tag "conformance"), which starts the cluster, the node, the
# load-balancer stand-in and infermesh, runs the suite's own test binary
# and tears everything down. The last lines printed are "N passed, M
# failed, K skipped" (GIE: one line, from Go's verdicts checked against the
# report; Gateway API: one line per profile's core and extended tests,
# from Go's verdicts, the report cross-checked).
#
# Environment:
#   SUITE            all (default: both, in turn; the exit status fails if
#                    either does), gie or gateway-api
#   RUN_TEST         one test's short name, passed to the suite's -run-test
#                    (for example InferencePoolAccepted); empty runs all;
#                    needs SUITE=gie or SUITE=gateway-api
#   SKIP_TESTS       short names, comma-separated, passed to the suite's
#                    -skip-tests (`make conformance-subset` sets it)
#   EPP_BODY_MODE    "default" (the default: a class without parametersRef,
#                    FULL_DUPLEX_STREAMED both ways, as a user following GIE's
#                    guides gets), or the GatewayClass's eppRequestBodyMode:
#                    Streamed (for EPPs older than lwepp v1.6.1, such as
#                    LWEPP_VERSION=v1.6.0) or FullDuplexStreamed; GIE only
#   REPORT           the report YAML (default conformance/reports/<suite version>/infermesh-<RUN_TEST or all>.yaml)
#   CONFORMANCE_TEST the harness test to run (default TestGIEConformance, or
#                    TestGatewayAPIConformance with SUITE=gateway-api;
#                    TestClusterSmoke checks the cluster and node alone)
#   GO               go command (default go)
# Needs root (network namespaces, a bridge). Logs stay in the state folder
# it prints (pod logs under node/logs/).
set -euo pipefail
# Go 1.27 (Gateway API v1.7.0 needs it): the toolchain the module proxy
# serves, fetched by the go command on first use (README).
export GOTOOLCHAIN=go1.27.3
cd "$(dirname "$0")/.."
GO=${GO:-go}
SUITE=${SUITE:-all}
RUN_TEST=${RUN_TEST:-}
SKIP_TESTS=${SKIP_TESTS:-}
EPP_BODY_MODE=${EPP_BODY_MODE:-default}
GIE_CONFORMANCE_VERSION=${GIE_CONFORMANCE_VERSION:-v1.6.0}
GWAPI_CONFORMANCE_VERSION=${GWAPI_CONFORMANCE_VERSION:-v1.7.0}
CACHE_ROOT=${INFERMESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infermesh}
if [ "$SUITE" = all ]; then
	# Both suites, one after the other (they share the service network, so
	# never at once), each with its own report; RUN_TEST, SKIP_TESTS and
	# REPORT name one suite's tests and file, so they are refused here.
	if [ -n "$RUN_TEST$SKIP_TESTS${REPORT:-}" ]; then
		echo "conformance: RUN_TEST, SKIP_TESTS and REPORT name one suite's tests and file: add SUITE=gie or SUITE=gateway-api (SUITE=all, the default, runs both suites whole)" >&2
		exit 1
	fi
	rc=0
	SUITE=gie "$0" || rc=1
	SUITE=gateway-api "$0" || rc=1
	exit $rc
fi
case $SUITE in
gie)
	HARNESS_TEST=TestGIEConformance version=$GIE_CONFORMANCE_VERSION
	suite=$CACHE_ROOT/images/gie-conformance.test-$version/bin/gie-conformance.test
	test_list=
	;;
gateway-api)
	HARNESS_TEST=TestGatewayAPIConformance version=$GWAPI_CONFORMANCE_VERSION
	suite=$CACHE_ROOT/images/gwapi-conformance.test-$version/bin/gwapi-conformance.test
	test_list=$(dirname "$(dirname "$suite")")/tests.tsv
	;;
*)
	echo "conformance: SUITE must be gie, gateway-api or all, got '$SUITE'" >&2
	exit 1
	;;
esac
CONFORMANCE_TEST=${CONFORMANCE_TEST:-$HARNESS_TEST}
REPORT=${REPORT:-conformance/reports/$version/infermesh-${RUN_TEST:-all}.yaml}
[[ $REPORT == /* ]] || REPORT=$PWD/$REPORT

log() { printf '==> conformance: %s\n' "$*" >&2; }
[[ $(id -u) == 0 ]] || { echo "conformance: needs root (network namespaces)" >&2; exit 1; }

start=$SECONDS
k8s=$(hack/k8s-test-binaries.sh)
images=$(SUITE=$SUITE GIE_CONFORMANCE_VERSION=$GIE_CONFORMANCE_VERSION GWAPI_CONFORMANCE_VERSION=$GWAPI_CONFORMANCE_VERSION hack/images.sh)
[[ -x $suite ]] || { echo "conformance: hack/images.sh left no $suite" >&2; exit 1; }
log "binaries ready in $((SECONDS - start)) s"

state=$(mktemp -d "${TMPDIR:-/tmp}/infermesh-conformance.XXXXXX")
mkdir -p "$(dirname "$REPORT")"
rm -f "$REPORT"
summary=$state/summary
log "state and logs in $state"

rc=0
KUBE_TEST_BINARIES=$k8s/bin \
	CONFORMANCE_IMAGES=$images CONFORMANCE_SUITE=$suite CONFORMANCE_TEST_LIST=$test_list CONFORMANCE_RUN_TEST=$RUN_TEST \
	CONFORMANCE_SKIP_TESTS=$SKIP_TESTS CONFORMANCE_EPP_BODY_MODE=$EPP_BODY_MODE \
	CONFORMANCE_REPORT=$REPORT CONFORMANCE_SUMMARY=$summary CONFORMANCE_STATE=$state \
	"$GO" test -tags=conformance -count=1 -timeout 0 -v -run "^${CONFORMANCE_TEST}\$" ./conformance/harness/ || rc=$?
log "logs in $state; report ${REPORT}; took $((SECONDS - start)) s"
if [[ $CONFORMANCE_TEST != "$HARNESS_TEST" ]]; then
	exit "$rc"
elif [[ -s $summary ]]; then
	cat "$summary"
else
	echo "0 passed, 0 failed, 0 skipped (no agreed result: the suite wrote no report, or its report disagrees with Go's verdicts; see the output above)"
	[[ $rc != 0 ]] || rc=1
fi
exit "$rc"
