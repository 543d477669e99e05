// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config configures an Elector. Client, Namespace and Name are required.
type Config struct {
	// Client reads and writes the Lease.
	Client kubernetes.Interface
	// Namespace and Name of the coordination.k8s.io/v1 Lease.
	Namespace, Name string
	// Identity of this replica in the Lease's holderIdentity. Default: the
	// hostname (the pod name in a cluster) plus a random suffix.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go; zero
	// means client-go's core defaults of 15 s, 10 s and 2 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

func (c *Config) setDefaults() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("leaderelection: Config.Client is required"))
	}
	if c.Namespace == "" || c.Name == "" {
		errs = append(errs, errors.New("leaderelection: Config.Namespace and Config.Name (the Lease) are required"))
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = host + "_" + rand.String(8)
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 15 * time.Second
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = 10 * time.Second
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = 2 * time.Second
	}
	if c.LeaseDuration <= c.RenewDeadline || c.RenewDeadline <= c.RetryPeriod {
		errs = append(errs, fmt.Errorf("leaderelection: need LeaseDuration > RenewDeadline > RetryPeriod, got %v, %v, %v",
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod))
	}
	return errors.Join(errs...)
}

// Elector campaigns for the Lease and runs the registered functions while it
// holds it.
type Elector struct {
	cfg     Config
	leading atomic.Bool
	leader  atomic.Value // string: the last holder observed

	mu      sync.Mutex
	funcs   []func(ctx context.Context)
	running sync.WaitGroup
	cancel  context.CancelFunc // stops the running functions; nil when not leading
}

// New validates cfg and returns an Elector. It fails when a required field
// is missing or the durations are not ordered.
func New(cfg Config) (*Elector, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	e := &Elector{cfg: cfg}
	e.leader.Store("")
	return e, nil
}

// Identity is this replica's holder identity.
func (e *Elector) Identity() string { return e.cfg.Identity }

// AddRunFunction registers f to run in its own goroutine each time this
// replica becomes leader. Its context is cancelled when leadership ends; f
// must return promptly then. Call before Run.
func (e *Elector) AddRunFunction(f func(ctx context.Context)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.funcs = append(e.funcs, f)
}

// IsLeader reports whether this replica holds the Lease now. Writers check it
// before each write.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Leader is the holder identity last observed, or "" if none yet.
func (e *Elector) Leader() string { return e.leader.Load().(string) }

// Run campaigns until ctx ends, campaigning again whenever the Lease is
// lost. When ctx ends while leading, it cancels the run functions, waits for
// them to return, and only then releases the Lease, so a successor never
// overlaps with a write still in flight.
func (e *Elector) Run(ctx context.Context) {
	for ctx.Err() == nil {
		e.runOnce(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(e.cfg.RetryPeriod):
		}
	}
}

func (e *Elector) runOnce(ctx context.Context) {
	// The elector gets its own context so that shutdown can stop the run
	// functions before the elector releases the Lease.
	leCtx, cancelLE := context.WithCancel(context.Background())
	defer cancelLE()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			e.stopLeading()
			cancelLE()
		case <-done:
		}
	}()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
			Client:     e.cfg.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.Identity},
		},
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.cfg.Namespace + "/" + e.cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: e.startLeading,
			OnStoppedLeading: e.stopLeading,
			OnNewLeader: func(id string) {
				e.leader.Store(id)
				slog.Info("leader elected", "lease", e.cfg.Namespace+"/"+e.cfg.Name, "leader", id, "self", id == e.cfg.Identity)
			},
		},
	})
	if err != nil {
		// Only a programming error: the config was validated in New.
		slog.Error("leaderelection: invalid elector configuration", "error", err)
		return
	}
	le.Run(leCtx)
}

func (e *Elector) startLeading(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fctx, cancel := context.WithCancel(ctx)
	e.cancel = cancel
	e.leading.Store(true)
	for _, f := range e.funcs {
		e.running.Add(1)
		go func() {
			defer e.running.Done()
			f(fctx)
		}()
	}
}

// stopLeading marks this replica as not leading, cancels the run functions
// and waits for them. Safe to call when not leading, and more than once.
func (e *Elector) stopLeading() {
	e.leading.Store(false)
	e.mu.Lock()
	cancel := e.cancel
	e.cancel = nil
	e.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	e.running.Wait()
}
