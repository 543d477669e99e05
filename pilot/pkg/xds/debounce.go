// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// debouncer turns a stream of change signals into push calls:
//
//   - a change after at least quiet without a push is pushed at once
//     (an idle control plane adds no delay);
//   - a change that follows a push by less than quiet opens a burst: the
//     push waits until quiet has passed without a change, but never longer
//     than maxDelay after the burst's first change.
//
// So no change waits longer than maxDelay, and a steady stream of changes
// is pushed at most about once per quiet period.
type debouncer struct {
	quiet, maxDelay time.Duration
	clock           clock.WithTicker
}

// run calls push for the signals on kick until ctx is done. kick should be
// buffered (size 1) and written without blocking. push runs on run's
// goroutine, so pushes never overlap.
func (d *debouncer) run(ctx context.Context, kick <-chan struct{}, push func()) {
	var lastPush time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		now := d.clock.Now()
		if lastPush.IsZero() || now.Sub(lastPush) >= d.quiet {
			push()
			lastPush = d.clock.Now()
			continue
		}
		if !d.wait(ctx, kick, now) {
			return
		}
		push()
		lastPush = d.clock.Now()
	}
}

// wait blocks until quiet has passed since the last signal or maxDelay
// since first, whichever is earlier. It returns false when ctx is done.
func (d *debouncer) wait(ctx context.Context, kick <-chan struct{}, first time.Time) bool {
	last := first
	deadline := first.Add(d.maxDelay)
	for {
		until := last.Add(d.quiet)
		if until.After(deadline) {
			until = deadline
		}
		t := d.clock.NewTimer(until.Sub(d.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
			return true
		case <-kick:
			t.Stop()
			last = d.clock.Now()
			if !last.Before(deadline) {
				return true
			}
		}
	}
}
