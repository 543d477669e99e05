// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// startupMemoryLimit is the Go runtime's soft memory limit while
// pilot-discovery starts, unless the environment sets GOMEMLIMIT (as the
// chart does from the container's memory limit). Start-up reads everything
// at once: file mode decodes the whole folder, cluster mode decodes every
// informer's list. With the collector's default pacing the heap grows to
// twice the live heap before each collection, so at 10,000 pools (100,000
// Pods, 450-470 MiB live at the peak) the process peaked above 1 GiB in
// either mode. The limit makes the collector run earlier instead, which
// costs little while the live heap is well under it; it follows the live
// heap up to one and a half times it when that is more (limitFor), so a
// bigger input makes the collector run at most twice as often as the
// default pacing would, never in a spiral. Measured in
// architecture/log/filemode.md and architecture/log/xds.md, "Cluster-mode
// start".
const startupMemoryLimit = 850 << 20

// limitStartupMemory sets the start-up limit (see startupMemoryLimit) and
// returns the function that lifts it, which the caller runs once the first
// configuration is published. With GOMEMLIMIT set it does nothing.
func limitStartupMemory(lookupEnv func(string) (string, bool)) (lift func()) {
	if _, ok := lookupEnv("GOMEMLIMIT"); ok {
		return func() {}
	}
	prev := debug.SetMemoryLimit(startupMemoryLimit)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { followLiveHeap(ctx, 100*time.Millisecond) })
	return sync.OnceFunc(func() {
		cancel()
		wg.Wait()
		debug.SetMemoryLimit(prev)
	})
}

// followLiveHeap raises the limit to limitFor the live heap every tick,
// until ctx ends.
func followLiveHeap(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(live)
		if live[0].Value.Kind() == metrics.KindUint64 {
			debug.SetMemoryLimit(limitFor(live[0].Value.Uint64()))
		}
	}
}

// limitFor is the start-up limit for a live heap of live bytes: the fixed
// limit, or one and a half times the live heap when that is more (the
// collector then runs as often as with GOGC=50; the default pacing, GOGC=100,
// allows twice the live heap, which is what took a 10,000-pool start over
// 1 GiB).
func limitFor(live uint64) int64 {
	if live > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return max(startupMemoryLimit, int64(live)/2*3)
}

// whenReady runs f once ready reports true (checked every 100 ms), unless
// ctx ends first.
func whenReady(ctx context.Context, ready func() bool, f func()) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !ready() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	f()
}
