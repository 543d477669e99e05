// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package bootstrap

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A smaps excerpt in the kernel's format: the executable's text, its
// read-only data (dirty in the page cache, as right after a build), its
// writable data, a read-only segment with copied-on-write pages, and an
// anonymous heap mapping.
const smapsSample = `00400000-0292e000 r-xp 00000000 fe:00 9994403                            /opt/pilot-discovery
Size:              38072 kB
Rss:               26284 kB
Private_Clean:     26284 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
THPeligible:    0
VmFlags: rd ex mr mw me dw
0292e000-05bdc000 r--p 0252e000 fe:00 9994403                            /opt/pilot-discovery
Rss:               33128 kB
Private_Dirty:     33128 kB
Anonymous:             0 kB
05bdc000-05cbf000 rw-p 057dc000 fe:00 9994403                            /opt/pilot-discovery
Rss:                 780 kB
Private_Dirty:       292 kB
Anonymous:           292 kB
06000000-06100000 r--p 00000000 fe:00 9994403                            /opt/pilot-discovery
Rss:                  12 kB
Private_Dirty:         4 kB
Anonymous:             4 kB
c000000000-c004000000 rw-p 00000000 00:00 0
Rss:               20480 kB
Private_Dirty:     20480 kB
Anonymous:         20480 kB
`

func TestParseSmaps(t *testing.T) {
	maps, err := parseSmaps(bufio.NewScanner(strings.NewReader(smapsSample)))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Start, End uintptr
		Perms      string
		Path       string
		RSS        int64
		Clean      bool
	}
	var got []row
	for _, m := range maps {
		got = append(got, row{m.start, m.end, m.perms, m.path, m.rssKB, m.cleanReadOnly()})
	}
	want := []row{
		{0x400000, 0x292e000, "r-xp", "/opt/pilot-discovery", 26284, true},
		{0x292e000, 0x5bdc000, "r--p", "/opt/pilot-discovery", 33128, true},
		// Writable: never dropped.
		{0x5bdc000, 0x5cbf000, "rw-p", "/opt/pilot-discovery", 780, false},
		// Read-only but with dirty anonymous pages (a relocated segment):
		// dropping them would lose data.
		{0x6000000, 0x6100000, "r--p", "/opt/pilot-discovery", 12, false},
		{0xc000000000, 0xc004000000, "rw-p", "", 20480, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseSmaps (-want +got):\n%s", diff)
	}
	if _, err := parseSmaps(bufio.NewScanner(strings.NewReader("garbage line\n"))); err == nil {
		t.Error("a malformed header line parsed without error")
	}
}

// releaseBinaryPages on the test binary itself: its text is mapped clean
// and read-only, so something is dropped, and the process keeps running
// the code it dropped (this test's own remaining lines).
func TestReleaseBinaryPages(t *testing.T) {
	n, err := releaseBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 {
		t.Fatalf("released %d bytes; the test binary's text was resident", n)
	}
	if again, err := releaseBinaryPages(); err != nil || again >= n {
		t.Fatalf("second release %d bytes (%v), want less than the first %d", again, err, n)
	}
}

// waitQuiet on a CPU clock the test drives: quiet once a whole window
// passed without CPU use, never while each tick costs more than the
// allowance, and not when the clock cannot be read.
func TestWaitQuiet(t *testing.T) {
	const tick, window, allowance = 10 * time.Millisecond, 50 * time.Millisecond, 5 * time.Millisecond
	clock := func(perRead time.Duration) func() (time.Duration, bool) {
		var total time.Duration
		return func() (time.Duration, bool) { total += perRead; return total, true }
	}
	start := time.Now()
	if !waitQuiet(t.Context(), window, allowance, 5*time.Second, tick, clock(0)) {
		t.Fatal("no CPU used: not quiet within 5 s")
	}
	if took := time.Since(start); took < window {
		t.Fatalf("quiet after %v, before one whole window of %v", took, window)
	}
	// 6 ms per read is over the 5 ms allowance between any two reads, so no
	// window is quiet even when a loaded machine delays ticks.
	if waitQuiet(t.Context(), window, allowance, 300*time.Millisecond, tick, clock(6*time.Millisecond)) {
		t.Fatal("busy: quiet anyway")
	}
	// 0.5 ms per tick is 2.5-3 ms per window: quiet.
	if !waitQuiet(t.Context(), window, allowance, 5*time.Second, tick, clock(500*time.Microsecond)) {
		t.Fatal("light use under the allowance: not quiet")
	}
	if waitQuiet(t.Context(), window, allowance, 5*time.Second, tick, func() (time.Duration, bool) { return 0, false }) {
		t.Fatal("an unreadable clock: quiet anyway")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if waitQuiet(ctx, window, allowance, 5*time.Second, tick, clock(2*time.Millisecond)) {
		t.Fatal("a cancelled context: quiet anyway")
	}
	// The real clock of this process can be read.
	if _, ok := processCPU(); !ok {
		t.Fatal("processCPU failed")
	}
}
