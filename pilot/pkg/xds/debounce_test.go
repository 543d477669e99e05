// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// countingClock counts the timers the debouncer creates, so a test knows
// when it is waiting on a new one, and its reads of the time, so a test knows
// when it recorded a push's time (it reads the clock right after push).
type countingClock struct {
	*clocktesting.FakeClock
	mu     sync.Mutex
	timers int
	nows   int
}

func (c *countingClock) Now() time.Time {
	c.mu.Lock()
	c.nows++
	c.mu.Unlock()
	return c.FakeClock.Now()
}

func (c *countingClock) nowCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nows
}

func (c *countingClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.timers++
	c.mu.Unlock()
	return c.FakeClock.NewTimer(d)
}

func (c *countingClock) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timers
}

// debounceRig runs a debouncer on a fake clock and records push times.
type debounceRig struct {
	t      *testing.T
	clk    *countingClock
	kick   chan struct{}
	mu     sync.Mutex
	pushes []time.Duration
	// pushNows is the clock's read count when the last push was made.
	pushNows int
	start    time.Time
	pushed   chan struct{}
}

func newDebounceRig(t *testing.T, quiet, maxDelay time.Duration) *debounceRig {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &debounceRig{t: t, clk: &countingClock{FakeClock: clocktesting.NewFakeClock(start)}, kick: make(chan struct{}, 1), start: start, pushed: make(chan struct{}, 100)}
	d := &debouncer{quiet: quiet, maxDelay: maxDelay, clock: r.clk}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.run(ctx, r.kick, func() {
			r.mu.Lock()
			r.pushes = append(r.pushes, r.clk.Since(start))
			r.pushNows = r.clk.nowCount()
			r.mu.Unlock()
			r.pushed <- struct{}{}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// signal sends a change while idle (it is pushed at once).
func (r *debounceRig) signal() { r.kick <- struct{}{} }

// signalBurst sends a change during a burst and waits until the debouncer
// waits on the new timer it implies.
func (r *debounceRig) signalBurst() {
	n := r.clk.count()
	r.kick <- struct{}{}
	deadline := time.Now().Add(5 * time.Second)
	for r.clk.count() == n {
		if time.Now().After(deadline) {
			r.t.Fatal("debouncer set no timer")
		}
		time.Sleep(time.Millisecond)
	}
}

func (r *debounceRig) step(d time.Duration) { r.clk.Step(d) }

func (r *debounceRig) waitPush() time.Duration {
	select {
	case <-r.pushed:
	case <-time.After(5 * time.Second):
		r.t.Fatal("no push")
	}
	r.mu.Lock()
	at, n := r.pushes[len(r.pushes)-1], r.pushNows
	r.mu.Unlock()
	// The debouncer records the push's time after push returns; a clock step
	// before that would move the recorded time (a race seen under load).
	deadline := time.Now().Add(5 * time.Second)
	for r.clk.nowCount() == n {
		if time.Now().After(deadline) {
			r.t.Fatal("debouncer did not record the push's time")
		}
		time.Sleep(time.Millisecond)
	}
	return at
}

func (r *debounceRig) noPush() {
	select {
	case <-r.pushed:
		r.t.Fatal("unexpected push")
	case <-time.After(50 * time.Millisecond):
	}
}

func TestDebounceIdlePushesAtOnce(t *testing.T) {
	r := newDebounceRig(t, 100*time.Millisecond, time.Second)
	r.signal()
	if at := r.waitPush(); at != 0 {
		t.Fatalf("idle change pushed after %s, want at once", at)
	}
	r.clk.Step(200 * time.Millisecond) // idle again
	r.signal()
	if at := r.waitPush(); at != 200*time.Millisecond {
		t.Fatalf("second idle change pushed at %s", at)
	}
}

func TestDebounceCoalescesBurst(t *testing.T) {
	r := newDebounceRig(t, 100*time.Millisecond, time.Second)
	r.signal()
	r.waitPush()    // t=0
	r.signalBurst() // a burst starts at t=0
	r.step(50 * time.Millisecond)
	r.signalBurst() // t=50: the quiet period restarts
	r.step(60 * time.Millisecond)
	r.noPush() // t=110 < 150
	r.step(40 * time.Millisecond)
	if at := r.waitPush(); at != 150*time.Millisecond {
		t.Fatalf("burst pushed at %s, want 150ms", at)
	}
}

func TestDebounceMaxDelayBoundsBurst(t *testing.T) {
	r := newDebounceRig(t, 100*time.Millisecond, 300*time.Millisecond)
	r.signal()
	r.waitPush()    // t=0
	r.signalBurst() // a burst from t=0: MaxDelay ends it at t=300
	for i := 1; i <= 15; i++ {
		r.step(20 * time.Millisecond)
		if i%4 == 0 { // a change every 80ms: the quiet period never ends
			r.signalBurst()
		}
	}
	if at := r.waitPush(); at != 300*time.Millisecond {
		t.Fatalf("burst pushed at %s, want at MaxDelay 300ms", at)
	}
}
