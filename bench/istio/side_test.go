// Istio side of the krt benchmark comparison (see hack/bench-compare.sh).
//
// scenario_bench_test.go in this directory is NOT committed: the script copies
// it from pkg/kube/krt/scenario_bench_test.go, rewriting the import path of the
// krt package to istio.io/istio/pkg/kube/krt. This file holds what differs
// between the two sides.
package krt_test

import (
	"os"
	"testing"

	istiolog "istio.io/istio/pkg/log"
)

func TestMain(m *testing.M) {
	// krt logs "<name> synced" at info for every derived collection; silence it.
	istiolog.FindScope("krt").SetOutputLevel(istiolog.ErrorLevel)
	os.Exit(m.Run())
}

// transformationCount reports the total number of transformation runs of a
// derived collection. Istio's krt does not expose it.
func transformationCount(c any) (uint64, bool) { return 0, false }
