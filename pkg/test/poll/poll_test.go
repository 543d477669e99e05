// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package poll

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r) // stop like t.Fatalf would
}

func run(f func(t testing.TB)) (failed string) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	f(r)
	return ""
}

func TestUntil(t *testing.T) {
	var n atomic.Int32
	go func() {
		time.Sleep(20 * time.Millisecond)
		n.Store(1)
	}()
	if f := run(func(tb testing.TB) { Until(tb, 5*time.Second, "n set", func() bool { return n.Load() == 1 }) }); f != "" {
		t.Fatalf("failed although the condition came true: %s", f)
	}
	if f := run(func(tb testing.TB) {
		UntilOr(tb, 30*time.Millisecond, "never", func() bool { return false }, func() string { return "state" })
	}); !strings.Contains(f, "not reached within") {
		t.Fatalf("a condition that never holds did not fail the test (%q)", f)
	}
}
