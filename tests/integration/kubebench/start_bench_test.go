// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package kubebench

import (
	"slices"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// BenchmarkClusterStart measures kubeenv.Start: one op starts a whole new
// cluster (etcd, kube-apiserver, kube-controller-manager, the Node) and stops
// it with Env.Stop, which is not timed. It reports the median start-up time
// and the median overhead of the harness over kube-apiserver's own readiness
// (Start's time minus Env.APIServerReadyAfter); the target bounds that overhead
// at 1 s. Run with -benchtime 5x for the median of 5.
func BenchmarkClusterStart(b *testing.B) {
	starts := make([]time.Duration, 0, b.N)
	overheads := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		began := time.Now()
		env := kubeenv.Start(b)
		took := time.Since(began)
		b.StopTimer()
		env.Stop()
		b.StartTimer()
		starts = append(starts, took)
		overheads = append(overheads, took-env.APIServerReadyAfter)
	}
	b.StopTimer()
	b.ReportMetric(medianOf(starts).Seconds(), "median-start-s")
	b.ReportMetric(medianOf(overheads).Seconds(), "median-overhead-s")
}

// medianOf returns the median of d (the mean of the middle two for an even
// count); d is sorted in place.
func medianOf(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	if len(d)%2 == 1 {
		return d[len(d)/2]
	}
	return (d[len(d)/2-1] + d[len(d)/2]) / 2
}
