// Our side of the krt benchmark comparison: what scenario_bench_test.go needs
// that is not part of the API shared with Istio's krt. The Istio side's
// counterpart is bench/istio/side_test.go.
package krt_test

import "github.com/infermesh/infermesh/pkg/kube/krt"

// transformationCount reports the total number of transformation runs of the
// derived collection c so far; BenchmarkUpdate turns the difference over its
// timed loop into the runs/op metric.
func transformationCount(c any) (uint64, bool) {
	return krt.Stats(c).Transformations, true
}
