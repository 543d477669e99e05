// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package leaderelection

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/infermesh/infermesh/pkg/test/poll"
)

func fastConfig(c kubernetes.Interface, id string) Config {
	return Config{Client: c, Namespace: "infermesh-system", Name: "pilot-discovery", Identity: id,
		LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 15*time.Second, what, cond)
}

func holder(t *testing.T, c kubernetes.Interface) string {
	l, err := c.CoordinationV1().Leases("infermesh-system").Get(context.Background(), "pilot-discovery", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func TestConfigValidation(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("empty config accepted")
	}
	c := fastConfig(fake.NewClientset(), "a")
	c.RenewDeadline = 2 * time.Second // longer than LeaseDuration
	if _, err := New(c); err == nil {
		t.Fatal("RenewDeadline > LeaseDuration accepted")
	}
	e, err := New(Config{Client: fake.NewClientset(), Namespace: "ns", Name: "lease"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Identity() == "" {
		t.Fatal("no default identity")
	}
}

// One replica leads and runs its functions; when it shuts down, its functions
// finish before the Lease is released, and the other replica takes over.
func TestHandoverOnShutdown(t *testing.T) {
	client := fake.NewClientset()
	a, err := New(fastConfig(client, "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(fastConfig(client, "b"))
	if err != nil {
		t.Fatal(err)
	}
	var aFinished atomic.Bool
	var holderWhenAFinished atomic.Value
	a.AddRunFunction(func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(200 * time.Millisecond) // a write still in flight
		holderWhenAFinished.Store(holder(t, client))
		aFinished.Store(true)
	})
	var bRuns atomic.Int32
	b.AddRunFunction(func(ctx context.Context) { bRuns.Add(1); <-ctx.Done() })

	ctxA, stopA := context.WithCancel(context.Background())
	aDone := make(chan struct{})
	go func() { a.Run(ctxA); close(aDone) }()
	waitFor(t, "a to lead", a.IsLeader)

	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	bDone := make(chan struct{})
	go func() { b.Run(ctxB); close(bDone) }()
	waitFor(t, "b to observe a", func() bool { return b.Leader() == "a" })
	if b.IsLeader() {
		t.Fatal("both replicas lead")
	}

	stopA()
	<-aDone
	if !aFinished.Load() {
		t.Fatal("a's run function had not returned when Run returned")
	}
	if h := holderWhenAFinished.Load(); h != "a" {
		t.Fatalf("Lease holder when a's last write finished = %q, want a (released too early)", h)
	}
	if a.IsLeader() {
		t.Fatal("a still claims leadership after shutdown")
	}
	waitFor(t, "b to take over", func() bool { return b.IsLeader() && holder(t, client) == "b" })
	if bRuns.Load() != 1 {
		t.Fatalf("b's run function started %d times, want 1", bRuns.Load())
	}
	stopB()
	<-bDone
}
