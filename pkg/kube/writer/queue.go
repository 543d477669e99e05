// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package writer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// term is what one leadership term of a writer needs: how to subscribe the
// queue to its sources and how to sync one key.
type term struct {
	name    string
	limiter workqueue.TypedRateLimiter[string]
	// synced gates the worker: nothing is processed before it has synced.
	synced krt.Syncer
	// register subscribes enqueue to the sources; the registrations end with
	// the term.
	register func(enqueue func(key string)) []krt.HandlerRegistration
	// sync brings one key to its desired state and reports whether it
	// wrote. An error requeues the key with backoff.
	sync func(ctx context.Context, key string) (bool, error)
	// workers is how many keys are synced at once (at least 1). The queue
	// never hands one key to two workers at the same time.
	workers int
}

// DefaultWorkers is the number of keys a writer syncs at once when its
// config leaves Workers zero. Each sync is one to three API requests, so
// throughput is bounded by the client's QPS, not by this number, once it
// covers the request latency.
const DefaultWorkers = 4

// run runs one term until ctx ends: a fresh rate-limited queue, the
// registrations, and the workers. It returns once every worker has stopped
// and the registrations are released.
func (t term) run(ctx context.Context) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(t.limiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Name: t.name})
	regs := t.register(func(key string) { q.Add(key) })
	defer func() {
		for _, r := range regs {
			r.UnregisterHandler()
		}
	}()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		q.ShutDown()
	}()
	if !t.synced.WaitUntilSynced(ctx.Done()) {
		return
	}
	b := &batch{name: t.name, clock: time.Now}
	var wg sync.WaitGroup
	for range max(t.workers, 1) {
		wg.Go(func() { t.work(ctx, q, b) })
	}
	wg.Wait()
}

// work syncs keys from q until it shuts down.
func (t term) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], b *batch) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		b.start()
		wrote, err := t.sync(ctx, key)
		failed := err != nil && ctx.Err() == nil
		switch {
		case failed:
			slog.Warn("writer: write failed, will retry", "writer", t.name, "key", key,
				"retries", q.NumRequeues(key), "error", err)
			q.AddRateLimited(key)
		default:
			q.Forget(key)
		}
		q.Done(key)
		b.done(wrote, failed, q.Len() == 0)
	}
}

// batch counts the keys synced since the queue was last drained, and logs
// one info line when it drains with something written or failed: a status
// write batch. Per-key lines are at debug (in the writers).
type batch struct {
	name  string
	clock func() time.Time

	mu                    sync.Mutex
	inFlight              int
	keys, written, failed int
	began                 time.Time
}

func (b *batch) start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight == 0 && b.keys == 0 {
		b.began = b.clock()
	}
	b.inFlight++
}

func (b *batch) done(wrote, failed, drained bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	b.keys++
	if wrote {
		b.written++
	}
	if failed {
		b.failed++
	}
	if b.inFlight > 0 || !drained {
		return
	}
	if b.written > 0 || b.failed > 0 {
		slog.Info("writer: batch written", "writer", b.name, "keys", b.keys, "written", b.written,
			"failed", b.failed, "duration", b.clock().Sub(b.began).String())
	}
	b.keys, b.written, b.failed = 0, 0, 0
}

// enqueueBatch returns a batch handler that enqueues each event's key.
func enqueueBatch[T any](key func(T) string, enqueue func(string)) func([]krt.Event[T]) {
	return func(events []krt.Event[T]) {
		for _, e := range events {
			enqueue(key(e.Latest()))
		}
	}
}

// registerSources subscribes enqueue to the desired collection (its current
// state replayed, so a new term enqueues every key) and, when live is set, to
// changes of live objects whose key is desired (drift, or a status write that
// dropped our entries). When ours is set, live objects for which it reports
// something of ours are enqueued too, desired or not, and the live state is
// replayed at the start of the term: that is how entries of ours that are no
// longer desired get removed even when they became undesired while no
// replica was leading.
func registerSources[D any, O interface {
	GetNamespace() string
	GetName() string
}](desired krt.Collection[D], desiredKey func(D) string, live krt.Collection[O], ours func(O) bool, enqueue func(string),
) []krt.HandlerRegistration {
	regs := []krt.HandlerRegistration{desired.RegisterBatch(enqueueBatch(desiredKey, enqueue), true)}
	if live == nil {
		return regs
	}
	handle := func(events []krt.Event[O]) {
		for _, e := range events {
			o := e.Latest()
			key := o.GetNamespace() + "/" + o.GetName()
			if o.GetNamespace() == "" {
				key = o.GetName()
			}
			if desired.GetKey(key) != nil || (ours != nil && e.New != nil && ours(*e.New)) {
				enqueue(key)
			}
		}
	}
	return append(regs, live.RegisterBatch(handle, ours != nil))
}
