// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A container's output is stored in the CRI log format, a line longer than
// maxLogLine in partial (P) parts, and read back whole, filtered by time.
func TestContainerLogFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	out, err := newContainerOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	w, werr := out.stdout, out.stderr
	long := strings.Repeat("x", maxLogLine+100)
	// Keep the child's ends open (as a started process would hold them)
	// until the lines are written.
	dupOut, dupErr := dupFile(t, w), dupFile(t, werr)
	logged := out.start()
	before := time.Now()
	_, _ = dupOut.WriteString("first\n" + long + "\n")
	_, _ = dupErr.WriteString("oops\n")
	_, _ = dupOut.WriteString("no newline")
	dupOut.Close()
	dupErr.Close()
	<-logged

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		f := strings.SplitN(l, " ", 4)
		if len(f) != 4 {
			t.Fatalf("line %q is not <time> <stream> <tag> <text>", l)
		}
		if _, err := time.Parse(time.RFC3339Nano, f[0]); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		tags = append(tags, f[1]+" "+f[2])
	}
	// The stderr line may come anywhere between the stdout ones.
	if n := strings.Count(strings.Join(tags, ","), "stdout P"); n != 1 || len(tags) != 5 {
		t.Errorf("tags %v, want one partial stdout part among 5 lines", tags)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &logReader{f: f, since: before.Add(-time.Second)}
	var got []string
	for l, ok := r.next(); ok; l, ok = r.next() {
		got = append(got, l.text)
	}
	var short []string
	for _, g := range got {
		if len(g) > 100 {
			short = append(short, "<"+fmtLen(g)+">")
			continue
		}
		short = append(short, g)
	}
	want := map[string]bool{"first": true, "<" + fmtLen(long) + ">": true, "oops": true, "no newline": true}
	for _, s := range short {
		delete(want, s)
	}
	if len(got) != 4 || got[0] != "first" && got[0] != "oops" || len(want) != 0 {
		t.Errorf("read back %q, want first, the long line whole, oops and no newline", short)
	}
	f2, _ := os.Open(path)
	defer f2.Close()
	r = &logReader{f: f2, since: time.Now().Add(time.Hour)}
	if l, ok := r.next(); ok {
		t.Errorf("a line before since was returned: %q", l.text)
	}
}

// dupFile returns a second descriptor of f: the copy a child process
// keeps when start closes the parent's.
func dupFile(t *testing.T, f *os.File) *os.File {
	t.Helper()
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), f.Name())
}

func fmtLen(s string) string { return strconv.Itoa(len(s)) + " bytes" }

// Partial parts join within their own stream: a stderr line written
// between two parts of a long stdout line stays whole and separate (the
// file interleaves the streams).
func TestLogReaderJoinsPartsPerStream(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	content := ts + " stdout P abc\n" + ts + " stderr F oops\n" + ts + " stdout F def\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &logReader{f: f}
	var got []string
	for l, ok := r.next(); ok; l, ok = r.next() {
		got = append(got, l.text)
	}
	if strings.Join(got, "|") != "oops|abcdef" {
		t.Errorf("lines %q, want oops then abcdef", got)
	}
}
