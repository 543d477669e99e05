// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"math"
	"runtime/debug"
	"sync/atomic"
	"testing"
)

func TestLimitFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int64
	}{
		{0, startupMemoryLimit},
		{300 << 20, startupMemoryLimit},
		{startupMemoryLimit / 2, startupMemoryLimit},
		{startupMemoryLimit / 3 * 2, startupMemoryLimit},
		{600 << 20, 900 << 20},
		{math.MaxUint64, math.MaxInt64},
	} {
		if got := limitFor(c.live); got != c.want {
			t.Errorf("live %d: limit %d, want %d", c.live, got, c.want)
		}
	}
}

// TestLimitStartupMemory: without GOMEMLIMIT the start-up limit applies
// until lifted, then the previous limit is back; with GOMEMLIMIT nothing
// changes.
func TestLimitStartupMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	lift := limitStartupMemory(func(string) (string, bool) { return "", false })
	if got := debug.SetMemoryLimit(-1); got < startupMemoryLimit || got == before {
		t.Errorf("limit during start-up %d, want at least %d", got, int64(startupMemoryLimit))
	}
	lift()
	lift() // lifting twice is harmless
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit after lifting %d, want the previous %d", got, before)
	}
	lift = limitStartupMemory(func(k string) (string, bool) { return "1GiB", k == "GOMEMLIMIT" })
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with GOMEMLIMIT set, limit %d, want it untouched (%d)", got, before)
	}
	lift()
}

func TestWhenReady(t *testing.T) {
	var polls, ran atomic.Int32
	whenReady(context.Background(), func() bool { return polls.Add(1) >= 3 }, func() { ran.Add(1) })
	if ran.Load() != 1 || polls.Load() != 3 {
		t.Errorf("ran %d times after %d polls, want once after 3", ran.Load(), polls.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	whenReady(ctx, func() bool { return false }, func() { ran.Add(1) })
	if ran.Load() != 1 {
		t.Error("ran although never ready")
	}
}
