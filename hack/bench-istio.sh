#!/usr/bin/env bash
# Copyright infermesh authors
# SPDX-License-Identifier: Apache-2.0
#
# bench-istio.sh races infermesh's whole control plane against Istio's
# (bench/istio-pipeline, its own module) on hack/gen-pools.sh's cluster:
# first the fairness check at 100 pools (both sides give every Gateway's
# proxy the same routes, clusters and endpoints for every pool), then
# BenchmarkPipeline, both sides alternating within one process, then
# benchstat (columns: side) and the table of medians against the goals.
# architecture/istio-comparison.md explains the rows.
#
# Environment:
#   COUNT      repetitions of every case (default 6)
#   POOLS      pool counts (default 1000,10000)
#   GATEWAYS   Gateway counts (default 1,10)
#   CHANGES    changes per route and endpoint run (default 100)
#   BENCH      go test -bench regexp (default Pipeline), e.g.
#              'Pipeline/pools=1000/gateways=1/'
#   DROP_EPP   a pool whose EPP our side does not see (test-only knob):
#              the fairness check must then fail, e.g. DROP_EPP=pool-0042
#   OUT        where raw output goes (default /tmp/bench-istio)
#   PROFILE    a folder for each side's CPU profile per row and heap
#              profile after settling (go tool pprof FILE)
#
# The first run downloads Istio's module (~134 MB with its dependencies)
# and compiles Istio's tree, 15-20 minutes on this 2-core machine; later
# runs reuse the build cache. Never part of `make test`.
set -euo pipefail
export GOTOOLCHAIN=go1.27.3

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$ROOT/bench/istio-pipeline
COUNT=${COUNT:-6}
BENCH=${BENCH:-Pipeline}
OUT=${OUT:-/tmp/bench-istio}
export PIPELINE_POOLS=${POOLS:-1000,10000}
export PIPELINE_GATEWAYS=${GATEWAYS:-1,10}
export PIPELINE_CHANGES=${CHANGES:-100}
export PIPELINE_DROP_EPP=${DROP_EPP:-}
export PIPELINE_PROFILE=${PROFILE:-}
if [[ -n $PIPELINE_PROFILE ]]; then
	mkdir -p "$PIPELINE_PROFILE"
fi

log() { printf '==> %s\n' "$*" >&2; }
mkdir -p "$OUT"

log "Istio's module for this build (hack/istio-src.sh)"
"$ROOT/hack/istio-src.sh" >/dev/null

BENCHSTAT=$(command -v benchstat || true)
if [[ -z $BENCHSTAT ]]; then
	bindir=${XDG_CACHE_HOME:-$HOME/.cache}/infermesh/bin
	BENCHSTAT=$bindir/benchstat
	if [[ ! -x $BENCHSTAT ]]; then
		log "installing benchstat into $bindir"
		mkdir -p "$bindir"
		(cd / && GOBIN=$bindir go install golang.org/x/perf/cmd/benchstat@latest)
	fi
fi

cd "$DIR"
log "building (the first build compiles Istio's tree: 15-20 minutes)"
go test -c -o "$OUT/pipeline.test" .

log "fairness check at 100 pools${DROP_EPP:+ (our side without the EPP of $DROP_EPP)}"
if ! "$OUT/pipeline.test" -test.run '^TestFairness$' -test.count 1 -test.v >"$OUT/fairness.txt" 2>&1; then
	grep -v '^=== RUN' "$OUT/fairness.txt" | tail -60 >&2
	echo "bench-istio: the fairness check failed; the race would not be fair (full output: $OUT/fairness.txt)" >&2
	exit 1
fi
grep -E '^(---|ok|PASS)' "$OUT/fairness.txt" >&2 || true

log "load before: $(uptime)"
start=$SECONDS
"$OUT/pipeline.test" -test.run '^$' -test.bench "$BENCH" -test.benchtime 1x -test.count "$COUNT" -test.timeout 0 | tee "$OUT/raw.txt"
log "benchmarks took $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s; load after: $(uptime)"

"$BENCHSTAT" -col /side "$OUT/raw.txt"
go run ./cmd/sidebyside "$OUT/raw.txt"
