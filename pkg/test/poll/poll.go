// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package poll

import (
	"testing"
	"time"
)

// Until calls cond, first every millisecond and backing off to every 50 ms,
// until it returns true, or fails the test (t.Fatalf, naming what and the
// bound) once within has passed. Call it from the test's goroutine.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	UntilOr(t, within, what, cond, nil)
}

// UntilOr is Until, adding describe() (the last state seen) to the failure
// message; describe may be nil.
func UntilOr(t testing.TB, within time.Duration, what string, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	interval := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			if describe != nil {
				t.Fatalf("%s: not reached within %v: %s", what, within, describe())
			}
			t.Fatalf("%s: not reached within %v", what, within)
		}
		time.Sleep(interval)
		interval = min(2*interval, 50*time.Millisecond)
	}
}
