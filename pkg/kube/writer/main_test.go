// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package writer

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/util/workqueue"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fastLimiter retries after 1 ms, so requeue tests take no time.
func fastLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond)
}

// waitFor polls cond until it holds or 10 s pass: the worker runs on its own
// goroutine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
