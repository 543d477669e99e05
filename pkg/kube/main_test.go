// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitFor polls cond until it holds or 10 s pass. Informers deliver
// asynchronously, so tests that write through a fake clientset wait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
