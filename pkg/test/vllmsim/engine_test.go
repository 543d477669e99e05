// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import "testing"

// A request that Close ends while it runs leaves the running set; the request
// queued behind it must not be admitted in its place (it is answered 503,
// like every request waiting at Close). Before the fix the queued request was
// admitted, and its handler picked admission or Close at random: the flake
// TestCloseFailsHeldAndWaitingRequests showed about once in many runs.
func TestClosedEngineAdmitsNothing(t *testing.T) {
	e := newEngine(Config{MaxRunning: 1, MaxLoRAs: 1, NumGPUBlocks: 10, Now: fixedNow})
	first := &job{blocks: 1, admitted: make(chan struct{})}
	queued := &job{blocks: 1, admitted: make(chan struct{})}
	e.mu.Lock()
	e.waiting = []*job{first, queued}
	e.scheduleLocked()
	e.mu.Unlock()
	select {
	case <-first.admitted:
	default:
		t.Fatal("the first job was not admitted")
	}

	e.close()
	e.finish(first, false)
	select {
	case <-queued.admitted:
		t.Fatal("a closed engine admitted the queued job when the running one left")
	default:
	}
	if st, _ := e.snapshot(); st.Running != 0 || st.Waiting != 1 {
		t.Errorf("after Close and finish: running %d waiting %d, want 0 and 1 (the queued job leaves through admit's errClosed)", st.Running, st.Waiting)
	}
}
