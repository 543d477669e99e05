// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package traffic

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// runner lets the demo use the project's test harnesses (pkg/test/kubeenv,
// pkg/test/epp, ...), which take a testing.TB, outside a test: Fatal ends the
// demo's goroutine as it ends a test's (runtime.Goexit), Cleanup registers
// what Run undoes at the end, last registered first, whatever happened.
//
// Only the methods below are implemented; the embedded testing.TB is nil,
// so a harness calling another one panics, which Run reports as an error
// rather than hide.
type runner struct {
	testing.TB

	mu       sync.Mutex
	logs     bytes.Buffer // harness log lines (Log, Error, and their f forms)
	cleanups []func()
	failed   bool
	first    error // the first failure's message
	tmp      string
	tmpN     int
}

func newRunner() *runner { return &runner{} }

func (r *runner) Helper()      {}
func (r *runner) Name() string { return "demo-traffic" }

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *runner) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	if r.first == nil {
		r.first = errors.New(msg)
	}
}

func (r *runner) Log(args ...any)                 { r.logLine(fmt.Sprintln(args...)) }
func (r *runner) Logf(format string, args ...any) { r.logLine(fmt.Sprintf(format, args...)) }
func (r *runner) Error(args ...any) {
	msg := fmt.Sprintln(args...)
	r.logLine(msg)
	r.fail(trimNL(msg))
}
func (r *runner) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.logLine(msg)
	r.fail(msg)
}
func (r *runner) Fail()    { r.fail("failed") }
func (r *runner) FailNow() { r.fail("failed"); runtime.Goexit() }
func (r *runner) Fatal(args ...any) {
	r.fail(trimNL(fmt.Sprintln(args...)))
	runtime.Goexit()
}
func (r *runner) Fatalf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// TempDir returns a new folder under the run's own temporary folder, which
// the last cleanup removes.
func (r *runner) TempDir() string {
	r.mu.Lock()
	if r.tmp == "" {
		dir, err := os.MkdirTemp("", "infermesh-demo-traffic-")
		if err != nil {
			r.mu.Unlock()
			r.Fatalf("temporary folder: %v", err)
		}
		r.tmp = dir
		r.cleanups = append([]func(){func() { _ = os.RemoveAll(dir) }}, r.cleanups...)
	}
	r.tmpN++
	dir := fmt.Sprintf("%s/%03d", r.tmp, r.tmpN)
	r.mu.Unlock()
	if err := os.Mkdir(dir, 0o700); err != nil {
		r.Fatalf("temporary folder: %v", err)
	}
	return dir
}

// logLine keeps a harness log line; as a test's log, they are shown only
// when the run failed (writeLogs).
func (r *runner) logLine(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs.WriteString("  | " + trimNL(s) + "\n")
}

// writeLogs writes the harness log lines kept so far to w.
func (r *runner) writeLogs(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = w.Write(r.logs.Bytes())
}

func trimNL(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s
}

// do runs body on a goroutine of its own, as a test runs, and returns once
// it has returned or ended with Fatal (Goexit), or panicked (reported as a
// failure).
func (r *runner) do(body func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				r.fail(fmt.Sprintf("panic: %v", p))
			}
		}()
		body()
	}()
	<-done
}

// runCleanups runs every cleanup, last registered first, each on its own
// goroutine so that a Fatal in one never skips the others; it returns once
// all have run. cleaned counts them.
func (r *runner) runCleanups(cleaned *atomic.Int64) {
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			return
		}
		f := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		r.do(f)
		cleaned.Add(1)
	}
}

// err is the first failure, or nil.
func (r *runner) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first
}
