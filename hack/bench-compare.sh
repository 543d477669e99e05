#!/usr/bin/env bash
# bench-compare.sh runs the krt benchmark scenario (pkg/kube/krt/scenario_bench_test.go)
# against our krt and against Istio's krt (bench/istio, a separate module), checks
# that both compute the same outputs with the same event counts, and prints
# benchstat's comparison (old = Istio, new = ours).
#
# Environment:
#   COUNT      benchmark repetitions per side (default 6; benchstat wants >= 6 for
#              confidence intervals)
#   BENCHTIME  go test -benchtime (default 1s, see below)
#   BENCH      go test -bench regexp to narrow the run (default . = everything),
#              e.g. BENCH='Update/E' or BENCH='Sync|Heap'
#   OUT        where raw outputs go (default /tmp/krt-bench-compare):
#              istio.txt, ours.txt, digest-{istio,ours}/ (rendered outputs)
#
# Bench time: 1s per benchmark, repeated COUNT times. One op of Sync, Heap or
# Churn at N=50k takes 0.3-1.2 s, so those run once or twice per repetition; the
# 1k/10k cases and all Update cases run thousands of ops (Update reports p50/p99
# over >= ~2,000 serial updates even for Istio's slowest case, E at N=50k).
# BenchmarkUpdate rebuilds its pipeline for every b.N probe (untimed but real),
# which dominates the wall time at N=50k. Measured on this 2-core machine: one
# repetition of everything takes ~57 s for Istio's side and ~52 s for ours, so
# COUNT=6 takes ~11 minutes plus ~1 minute of builds and digests (the very first
# build of bench/istio adds ~3 minutes and downloads ~134 MB of modules); that
# leaves room for the VM's run-to-run variance inside a 25-minute budget (2s
# would take an estimated ~20 minutes). Smaller BENCHTIME shortens mainly the
# 1k/10k cases; use BENCH to skip cases instead.
set -euo pipefail
# Go 1.27 (Gateway API v1.7.0 needs it): the toolchain the module proxy
# serves, fetched by the go command on first use (README).
export GOTOOLCHAIN=go1.27.3

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OURS_DIR=$ROOT/pkg/kube/krt
ISTIO_DIR=$ROOT/bench/istio
SCENARIO=scenario_bench_test.go
OUR_IMPORT=github.com/infermesh/infermesh/pkg/kube/krt
ISTIO_IMPORT=istio.io/istio/pkg/kube/krt

COUNT=${COUNT:-6}
BENCHTIME=${BENCHTIME:-1s}
BENCH=${BENCH:-.}
OUT=${OUT:-/tmp/krt-bench-compare}

log() { printf '==> %s\n' "$*" >&2; }

mkdir -p "$OUT"

# 1. The Istio side runs the very same scenario file, with only the import path changed.
sed "s#\"${OUR_IMPORT}\"#\"${ISTIO_IMPORT}\"#" "$OURS_DIR/$SCENARIO" >"$ISTIO_DIR/$SCENARIO"
if ! grep -q "\"${ISTIO_IMPORT}\"" "$ISTIO_DIR/$SCENARIO" || grep -q "\"${OUR_IMPORT}\"" "$ISTIO_DIR/$SCENARIO"; then
	echo "bench-compare: could not rewrite the krt import in $ISTIO_DIR/$SCENARIO" >&2
	exit 1
fi

# 2. Both sides must compute the same outputs and emit the same number of events.
digest() { # side dir
	local side=$1 dir=$2 out
	rm -rf "$OUT/digest-$side"
	if ! out=$(cd "$dir" && KRT_DIGEST_DUMP="$OUT/digest-$side" go test -count=1 -timeout 10m -run '^TestScenarioDigest$' -v . 2>&1); then
		printf '%s\n' "$out" >&2
		echo "bench-compare: TestScenarioDigest failed on the $side side" >&2
		return 1
	fi
	printf '%s\n' "$out" | grep '^krt-digest ' || true
}
log "TestScenarioDigest (Istio's krt; the first build of bench/istio takes several minutes)"
istio_digest=$(digest istio "$ISTIO_DIR")
log "TestScenarioDigest (our krt)"
our_digest=$(digest ours "$OURS_DIR")
if [[ -z $istio_digest || $istio_digest != "$our_digest" ]]; then
	echo "bench-compare: digests differ (or are missing)" >&2
	echo "--- Istio's krt:" >&2
	printf '%s\n' "$istio_digest" >&2
	echo "--- our krt:" >&2
	printf '%s\n' "$our_digest" >&2
	echo "--- outputs (diff -u istio ours, first 40 lines; full dumps in $OUT/digest-{istio,ours}):" >&2
	diff -u "$OUT/digest-istio" "$OUT/digest-ours" | head -40 >&2 || true
	exit 1
fi
log "digests match:"
printf '%s\n' "$our_digest" >&2

# 3. benchstat, installed outside the repository if it is not on PATH.
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

# 4. The benchmarks, one side after the other.
bench() { # side dir
	log "benchmarks ($1): -bench '$BENCH' -count $COUNT -benchtime $BENCHTIME"
	(cd "$2" && go test -run '^$' -bench "$BENCH" -count "$COUNT" -benchtime "$BENCHTIME" -timeout 0 .) | tee "$OUT/$1.txt"
}
start=$SECONDS
bench istio "$ISTIO_DIR"
bench ours "$OURS_DIR"
log "benchmarks took $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s; raw outputs in $OUT/{istio,ours}.txt"

# The two files differ in their "pkg:" line; -ignore pkg lets benchstat compare them.
cd "$OUT"
"$BENCHSTAT" -ignore pkg istio.txt ours.txt
