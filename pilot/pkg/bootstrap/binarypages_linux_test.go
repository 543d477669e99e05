// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package bootstrap

import (
	"bufio"
	"strings"
	"testing"

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
