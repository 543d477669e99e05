// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package bootstrap

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// releaseBinaryPages unmaps the resident pages of this process's own
// executable that are clean and read-only (the text, rodata and pclntab
// segments), with madvise(MADV_DONTNEED) on each such mapping. It returns
// the resident size dropped, in bytes.
//
// Why: package initialisation touches code and tables all over a 130 MB
// binary (over 400 packages have init functions), and the kernel's fault
// around maps up to 64 KiB of already-cached file pages per fault, so about
// 60 MiB of the binary stays mapped (VmRSS, RssFile) although the steady
// state uses a fraction of it. Unmapping file pages of a private mapping
// that were never copied on write is what the kernel's own reclaim does
// under pressure; a later access faults the page back from the page cache,
// with identical contents. Writable mappings, and any mapping holding
// anonymous (copied-on-write) pages, for example a relocated segment of a
// position-independent build, are never touched. (smaps' Private_Dirty is
// no guide: it also counts page-cache pages not yet written back, as for a
// binary just built.)
//
// Source: madvise(2), MADV_DONTNEED on private file mappings; proc(5),
// /proc/[pid]/smaps.
func releaseBinaryPages() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	maps, err := parseSmaps(bufio.NewScanner(f))
	if err != nil {
		return 0, err
	}
	var released int64
	for _, m := range maps {
		if m.path != exe || !m.cleanReadOnly() {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
		released += m.rssKB * 1024
	}
	return released, nil
}

// mapping is one entry of /proc/self/smaps.
type mapping struct {
	start, end uintptr
	perms      string // e.g. "r-xp"
	path       string
	// In kB, as smaps reports them.
	rssKB, anonymousKB int64
}

// cleanReadOnly reports whether dropping m's pages loses nothing: a
// private, non-writable mapping with resident pages, none of them
// anonymous.
func (m mapping) cleanReadOnly() bool {
	return len(m.perms) == 4 && m.perms[1] == '-' && m.perms[3] == 'p' &&
		m.anonymousKB == 0 && m.rssKB > 0
}

// parseSmaps reads smaps: a header line per mapping ("start-end perms
// offset dev inode [path]") followed by "Key: value kB" lines.
func parseSmaps(sc *bufio.Scanner) ([]mapping, error) {
	var out []mapping
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if strings.HasSuffix(fields[0], ":") {
			if len(out) == 0 || len(fields) < 2 {
				continue
			}
			v, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				continue // not a size line (VmFlags, THPeligible...)
			}
			m := &out[len(out)-1]
			switch fields[0] {
			case "Rss:":
				m.rssKB = v
			case "Anonymous:":
				m.anonymousKB = v
			}
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok || len(fields) < 5 {
			return nil, fmt.Errorf("smaps: unexpected line %q", sc.Text())
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("smaps: bad address range %q", fields[0])
		}
		m := mapping{start: uintptr(start), end: uintptr(end), perms: fields[1]}
		if len(fields) > 5 {
			m.path = strings.Join(fields[5:], " ")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// processCPU is the CPU time (user and system) this process has used so
// far (getrusage(2), RUSAGE_SELF).
func processCPU() (time.Duration, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
