// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import "sync"

// handlerQueue runs one user handler on its own goroutine, so a slow handler
// delays only itself. It implements HandlerRegistration.
type handlerQueue[T any] struct {
	q          *fifo[handlerItem[T]]
	f          func([]Event[T])
	synced     chan struct{}
	syncedOnce sync.Once
	done       chan struct{}
	doneOnce   sync.Once
	reg        *registration[T]
}

type handlerItem[T any] struct {
	events []Event[T]
	synced bool // marker: everything before it was the initial state
}

func newHandlerQueue[T any](f func([]Event[T])) *handlerQueue[T] {
	h := &handlerQueue[T]{
		q:      newFIFO[handlerItem[T]](),
		f:      f,
		synced: make(chan struct{}),
		done:   make(chan struct{}),
	}
	go h.run()
	return h
}

func (h *handlerQueue[T]) run() {
	for {
		items := h.q.take(h.done)
		if items == nil {
			return
		}
		for _, it := range items {
			select {
			case <-h.done:
				return
			default:
			}
			if it.synced {
				h.syncedOnce.Do(func() { close(h.synced) })
				continue
			}
			h.f(it.events)
		}
		clear(items)
	}
}

// deliver and markSynced run under the store's lock: they only enqueue.
func (h *handlerQueue[T]) deliver(events []Event[T], _ []string) {
	h.q.push(handlerItem[T]{events: events})
}
func (h *handlerQueue[T]) markSynced() { h.q.push(handlerItem[T]{synced: true}) }

// stopDelivery ends the goroutine; queued events are dropped.
func (h *handlerQueue[T]) stopDelivery() { h.doneOnce.Do(func() { close(h.done) }) }

// HasSynced is true once the handler has been called with the initial state.
func (h *handlerQueue[T]) HasSynced() bool {
	select {
	case <-h.synced:
		return true
	default:
		return false
	}
}

// WaitUntilSynced blocks until HasSynced, or returns false when stop closes or
// the registration is removed first.
func (h *handlerQueue[T]) WaitUntilSynced(stop <-chan struct{}) bool {
	select {
	case <-h.synced:
		return true
	case <-stop:
		return false
	case <-h.done:
		return h.HasSynced()
	}
}

// UnregisterHandler stops delivery and releases the goroutine.
func (h *handlerQueue[T]) UnregisterHandler() { h.reg.remove() }
