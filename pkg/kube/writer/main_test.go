// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package writer

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/util/workqueue"

	"github.com/infermesh/infermesh/pkg/test/poll"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fastLimiter retries after 1 ms, so requeue tests take no time.
func fastLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond)
}

// waitFor waits up to 10 s for cond: the worker runs on its own goroutine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, cond)
}
