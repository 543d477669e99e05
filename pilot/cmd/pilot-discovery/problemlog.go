// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Pacing of problemLog: it checks once the pipeline has been quiet for
// problemQuiet after a change (the controller computes after the file
// source has reloaded, on its own goroutines), and at least every
// problemMaxDelay while changes keep coming. The source's revision is
// read every problemPoll: a reload that only changes the rejected
// manifests moves no controller output.
const (
	problemQuiet    = 300 * time.Millisecond
	problemMaxDelay = 5 * time.Second
	problemPoll     = 250 * time.Millisecond
)

// problemLog logs, for discovery -f, the problems check -f would print for
// the folder, as they come and go: each new one at warn ("file: problem",
// with its kind, object, parent and text), each that goes at info ("file:
// problem resolved"), and after each change of the set one summary ("file:
// checked", problems as check counts them: the rejected manifests, which
// the file source logs itself, plus a route that went Accepted=False, a
// parentRef to nothing, ...). It returns when ctx ends.
func problemLog(ctx context.Context, src *file.Source, out gateway.Outputs, dir string, inference bool, log *slog.Logger) {
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	var syncers []krt.Syncer
	for _, c := range []changes{
		watched(out.ClassStatuses), watched(out.GatewayStatuses), watched(out.ListenerSetStatuses),
		watched(out.HTTPRouteStatuses), watched(out.GRPCRouteStatuses), watched(out.TLSRouteStatuses), watched(out.TCPRouteStatuses),
		watched(out.PoolStatuses), watched(out.ShadowServices),
	} {
		if c != nil {
			syncers = append(syncers, c)
			context.AfterFunc(ctx, c.onChange(poke).UnregisterHandler)
		}
	}
	for _, s := range syncers {
		if !s.WaitUntilSynced(ctx.Done()) {
			return
		}
	}
	var seen map[string]finding // nil until the first check
	check := func() {
		fs := findingsOf(out, src.Services())
		fs = append(fs, inputFindings(inputs{src: src, out: out, dir: dir, now: time.Now(), inference: inference})...)
		sortFindings(fs)
		now := map[string]finding{}
		for _, f := range fs {
			if f.note {
				continue
			}
			k := f.String()
			now[k] = f
			if _, ok := seen[k]; !ok {
				log.Warn("file: problem", "kind", f.what, "object", f.object, "parent", f.parent, "problem", f.text)
			}
		}
		changed := len(now) != len(seen)
		for k, f := range seen {
			if _, ok := now[k]; !ok {
				changed = true
				log.Info("file: problem resolved", "kind", f.what, "object", f.object, "parent", f.parent)
			}
		}
		for k := range now {
			if _, ok := seen[k]; !ok {
				changed = true
			}
		}
		if changed || seen == nil {
			rejected := len(src.Problems())
			log.Info("file: checked", "problems", rejected+len(now), "rejected", rejected, "dir", dir)
		}
		seen = now
	}
	check()
	rev := src.Revision()
	tick := time.NewTicker(problemPoll)
	defer tick.Stop()
	var quiet, deadline <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if r := src.Revision(); r != rev {
				rev = r
				poke()
			}
			continue
		case <-kick:
			quiet = time.After(problemQuiet)
			if deadline == nil {
				deadline = time.After(problemMaxDelay)
			}
			continue
		case <-quiet:
		case <-deadline:
		}
		quiet, deadline = nil, nil
		check()
	}
}

// changes is an output collection of any element type, as problemLog
// needs it: synced, and a call on every change.
type changes interface {
	krt.Syncer
	onChange(f func()) krt.HandlerRegistration
}

type changesOf[T any] struct{ krt.Collection[T] }

func (c changesOf[T]) onChange(f func()) krt.HandlerRegistration {
	return c.RegisterBatch(func([]krt.Event[T]) { f() }, false)
}

// watched is c as changes, or nil when c is (an output that is off).
func watched[T any](c krt.Collection[T]) changes {
	if c == nil {
		return nil
	}
	return changesOf[T]{c}
}
