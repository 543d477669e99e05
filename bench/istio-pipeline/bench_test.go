// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Knobs (environment; hack/bench-istio.sh sets them):
//
//	PIPELINE_POOLS     pool counts (default 1000,10000)
//	PIPELINE_GATEWAYS  Gateway counts (default 1,10)
//	PIPELINE_CHANGES   changes per route and endpoint benchmark run (default 100)
//	PIPELINE_PROFILE   a folder: each side's CPU profile of each row and its
//	                   heap profile after settling go there (profile_test.go)
var (
	benchPools    = envInts("PIPELINE_POOLS", []int{1000, 10000})
	benchGateways = envInts("PIPELINE_GATEWAYS", []int{1, 10})
	changesPerRun = envInts("PIPELINE_CHANGES", []int{100})[0]
)

const (
	podsPerPool = 10
	// coldTimeout bounds one cold start; changeTimeout one change.
	coldTimeout   = 10 * time.Minute
	changeTimeout = time.Minute
	// Settling: after a cold start, no xDS response and under 10% of a
	// core for settleQuiet (at most settleMax); between changes the same
	// over changeQuiet.
	settleQuiet = 500 * time.Millisecond
	settleMax   = 5 * time.Minute
	changeQuiet = 50 * time.Millisecond
)

// BenchmarkPipeline runs both control planes over the same generated
// cluster, one after the other within each case, so that the two sides of
// a row are measured in the same process minutes apart:
//
//	BenchmarkPipeline/pools=N/gateways=G/side=S/cold
//	BenchmarkPipeline/pools=N/gateways=G/side=S/route
//	BenchmarkPipeline/pools=N/gateways=G/side=S/endpoint
//
// cold: from the objects in the side's fake API server to every Gateway's
// proxy holding its complete configuration (Run.Cold); ns/op, B/op and
// allocs/op over that span (the in-process proxies' receiving included),
// cpu-sec/op (all the process's threads), and live-MB: the live heap after
// settling (two collections) minus the heap before the side started, the
// fake API server's objects excluded. Run with -benchtime 1x.
//
// route and endpoint: PIPELINE_CHANGES changes on the settled instance of
// cold, one at a time. ns/op is the mean from the write to the fake API
// server to the proxy of the changed Gateway receiving the changed route
// configuration (RDS) or assignment (EDS), p50-ns and p99-ns its
// percentiles; B/op and allocs/op are per change from the write until the
// process is idle again, so they count all the work the change caused
// (pushes to other proxies, the proxies' receiving included). Each
// arrival is checked afterwards to carry the change.
func BenchmarkPipeline(b *testing.B) {
	for _, n := range benchPools {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			for _, g := range benchGateways {
				in := cachedInputs(b, n, g)
				b.Run(fmt.Sprintf("gateways=%d", g), func(b *testing.B) {
					for _, side := range Sides() {
						b.Run("side="+side.Name, func(b *testing.B) { benchSide(b, side, in) })
						// What one side left behind is garbage before the
						// other side starts.
						runtime.GC()
					}
				})
			}
		})
	}
}

func benchSide(b *testing.B, side Side, in *Inputs) {
	var run *Run
	defer func() {
		if run != nil {
			run.Close()
		}
	}()
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		var live, cpu float64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if run != nil {
				run.Close()
			}
			var err error
			if run, err = Prepare(side, in); err != nil {
				b.Fatal(err)
			}
			heap0 := LiveHeap()
			prof := startProfile(b, side.Name, in, "cold")
			cpu0 := cpuTime()
			b.StartTimer()
			if err := run.Cold(coldTimeout); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			cpu += (cpuTime() - cpu0).Seconds()
			prof.stop()
			if err := run.Settle(settleQuiet, settleMax); err != nil {
				b.Fatal(err)
			}
			live += float64(LiveHeap()-heap0) / 1e6
			writeHeapProfile(b, side.Name, in)
			b.StartTimer()
		}
		b.ReportMetric(cpu/float64(b.N), "cpu-sec/op")
		b.ReportMetric(live/float64(b.N), "live-MB")
	})
	if run == nil {
		return
	}
	b.Run("route", func(b *testing.B) { benchChanges(b, run, "route", run.RouteChange) })
	b.Run("endpoint", func(b *testing.B) { benchChanges(b, run, "endpoint", run.EndpointChange) })
}

func benchChanges(b *testing.B, run *Run, row string, change func(int) Change) {
	b.ReportAllocs() // B/op and allocs/op below replace the timer's figures
	b.StopTimer()
	if err := run.Settle(changeQuiet, settleMax); err != nil {
		b.Fatal(err)
	}
	prof := startProfile(b, run.Side.Name, run.In, row)
	defer prof.stop()
	var (
		lat            []time.Duration
		mallocs, bytes uint64
		m0, m1         runtime.MemStats
	)
	for i := 0; i < b.N*changesPerRun; i++ {
		c := change(i)
		runtime.ReadMemStats(&m0)
		t0 := time.Now()
		if err := c.Apply(); err != nil {
			b.Fatal(err)
		}
		if err := c.Wait(c.Arrived, changeTimeout); err != nil {
			b.Fatalf("%s: change %d: %v", run.Side.Name, i, err)
		}
		lat = append(lat, time.Since(t0))
		if err := run.Settle(changeQuiet, settleMax); err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&m1)
		mallocs += m1.Mallocs - m0.Mallocs
		bytes += m1.TotalAlloc - m0.TotalAlloc
		if err := c.Verify(); err != nil {
			b.Fatalf("change %d: %v", i, err)
		}
	}
	n := float64(len(lat))
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	slices.Sort(lat)
	b.ReportMetric(float64(sum.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(mallocs)/n, "allocs/op")
	b.ReportMetric(float64(bytes)/n, "B/op")
}

var (
	inputsMu sync.Mutex
	inputsBy = map[[2]int]*Inputs{}
)

// cachedInputs generates the inputs for n pools over g Gateways once per
// process.
func cachedInputs(tb testing.TB, n, g int) *Inputs {
	tb.Helper()
	inputsMu.Lock()
	defer inputsMu.Unlock()
	if in := inputsBy[[2]int{n, g}]; in != nil {
		return in
	}
	in, err := Generate(n, podsPerPool, g)
	if err != nil {
		tb.Fatal(err)
	}
	inputsBy[[2]int{n, g}] = in
	return in
}

func envInts(name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			panic(fmt.Sprintf("%s=%q: want positive integers separated by commas", name, v))
		}
		out = append(out, n)
	}
	return out
}
