// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infermesh/infermesh/pkg/test/poll"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, cond)
}

// startFake starts c and shuts it down (waiting for every goroutine) when the
// test ends.
func startFake(t *testing.T, c *Client) {
	t.Helper()
	stop := make(chan struct{})
	c.Start(stop)
	t.Cleanup(func() {
		close(stop)
		c.Shutdown()
	})
}

// synced waits (bounded) for a collection or syncer to sync.
func synced(t *testing.T, what string, s interface {
	WaitUntilSynced(stop <-chan struct{}) bool
}) {
	t.Helper()
	timeout := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(timeout) })
	defer timer.Stop()
	if !s.WaitUntilSynced(timeout) {
		t.Fatalf("%s did not sync", what)
	}
}
