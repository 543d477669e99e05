// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Process is the user and system CPU time this process has used so far,
// over all its threads: work done on other goroutines (krt handlers, the
// push path, the garbage collector) counts. Unlike wall-clock time it does
// not grow when other work on the machine delays the benchmark, so the
// difference over a timed loop divided by b.N is a steadier per-operation
// figure.
func Process(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
