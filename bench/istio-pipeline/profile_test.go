// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
)

// profileDir is PIPELINE_PROFILE: where BenchmarkPipeline writes, per
// case, side and row, a CPU profile (cpu-pools=N-gateways=G-SIDE-ROW.pprof)
// and, after the cold row settled, a heap profile of what is live
// (heap-pools=N-gateways=G-SIDE.pprof). Both sides run in one process,
// one after the other, so each profile holds one side's work (and the
// in-process proxies'); the other side is closed and collected before.
var profileDir = os.Getenv("PIPELINE_PROFILE")

type cpuProfile struct{ f *os.File }

// startProfile starts the CPU profile of one row of one side, if asked.
func startProfile(tb testing.TB, side string, in *Inputs, row string) cpuProfile {
	if profileDir == "" {
		return cpuProfile{}
	}
	f, err := os.Create(profilePath("cpu", side, in, row))
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		tb.Fatal(err)
	}
	return cpuProfile{f}
}

func (p cpuProfile) stop() {
	if p.f == nil {
		return
	}
	pprof.StopCPUProfile()
	p.f.Close()
}

// writeHeapProfile writes what is live now (after a collection), if asked.
func writeHeapProfile(tb testing.TB, side string, in *Inputs) {
	if profileDir == "" {
		return
	}
	runtime.GC()
	f, err := os.Create(profilePath("heap", side, in, ""))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		tb.Fatal(err)
	}
}

func profilePath(kind, side string, in *Inputs, row string) string {
	name := fmt.Sprintf("%s-pools=%d-gateways=%d-%s", kind, in.Pools, in.Gateways, side)
	if row != "" {
		name += "-" + row
	}
	return filepath.Join(profileDir, name+".pprof")
}
