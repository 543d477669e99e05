// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import "sync"

// fifo is an unbounded first-in first-out queue with one consumer. Producers
// never block (they may run while holding a collection's lock); the consumer
// takes everything queued at once, which coalesces bursts.
type fifo[E any] struct {
	mu     sync.Mutex
	items  []E
	spare  []E
	signal chan struct{} // capacity 1: "items may be non-empty"
}

func newFIFO[E any]() *fifo[E] {
	return &fifo[E]{signal: make(chan struct{}, 1)}
}

// push appends e. It never blocks.
func (q *fifo[E]) push(e E) {
	q.mu.Lock()
	q.items = append(q.items, e)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// take blocks until at least one item is queued and returns all of them, or
// returns nil once stop is closed. The returned slice is valid until the next
// call to take.
func (q *fifo[E]) take(stop <-chan struct{}) []E {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			out := q.items
			clear(q.spare)
			q.items, q.spare = q.spare[:0], out
			q.mu.Unlock()
			return out
		}
		q.mu.Unlock()
		select {
		case <-q.signal:
		case <-stop:
			return nil
		}
	}
}
