// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package writer

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"k8s.io/client-go/util/workqueue"

	"github.com/infermesh/infermesh/pkg/kube/apply"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// OwnedConfig configures an OwnedWriter. Name, Desired, Owned, Client and
// IsLeader are required.
type OwnedConfig[O apply.Object, AC any] struct {
	// Name names the writer in logs and the workqueue, for example
	// "shadow-services".
	Name string
	// Desired is the collection of objects we want to exist.
	Desired krt.Collection[Desired[AC]]
	// Live, if set, is a collection of the live objects of the kind (an
	// informer, such as kube.Client.Services()). A change of a live object
	// whose key is desired enqueues the key, so drift is repaired promptly.
	// A sync whose cached object already carries our applied fields as
	// desired (apply.Owned.UpToDate) makes no request.
	Live krt.Collection[O]
	// Owned does the writing: ownership check, SSA, drift events, recreation.
	Owned *apply.Owned[O, AC]
	// Client returns the typed client for a namespace, for example
	// func(ns string) apply.Client[...] { return cs.CoreV1().Services(ns) }.
	Client func(namespace string) apply.Client[O, AC]
	// IsLeader is checked before each write.
	IsLeader func() bool
	// RateLimiter returns a new rate limiter for each leadership term.
	// Default: workqueue.DefaultTypedControllerRateLimiter.
	RateLimiter func() workqueue.TypedRateLimiter[string]
	// Workers is how many keys are synced at once; default DefaultWorkers.
	Workers int
	// OnNotOwned, if set, is called once each time a desired object is found
	// to collide with an object that is not ours (apply.ErrNotOwned), for
	// example to record an event on the object that wanted it.
	OnNotOwned func(d *Desired[AC], err error)
}

// OwnedWriter applies the desired objects of one kind that we own, while
// leading. See the package documentation for the rules.
type OwnedWriter[O apply.Object, AC any] struct {
	cfg OwnedConfig[O, AC]

	mu       sync.Mutex
	notOwned map[string]bool // keys already logged as not ours
}

// NewOwnedWriter validates cfg and returns a writer. It writes nothing until
// Run.
func NewOwnedWriter[O apply.Object, AC any](cfg OwnedConfig[O, AC]) (*OwnedWriter[O, AC], error) {
	var errs []error
	if cfg.Name == "" {
		errs = append(errs, errors.New("writer: OwnedConfig.Name is required"))
	}
	if cfg.Desired == nil || cfg.Owned == nil || cfg.Client == nil || cfg.IsLeader == nil {
		errs = append(errs, errors.New("writer: OwnedConfig.Desired, Owned, Client and IsLeader are required"))
	}
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &OwnedWriter[O, AC]{cfg: cfg, notOwned: map[string]bool{}}, nil
}

// Run writes until ctx ends: one leadership term. Pass it to
// Elector.AddRunFunction. It enqueues every desired key at once, so a new
// leader converges from whatever it finds.
func (w *OwnedWriter[O, AC]) Run(ctx context.Context) {
	term{
		name:     w.cfg.Name,
		limiter:  w.cfg.RateLimiter(),
		synced:   w.cfg.Desired,
		register: w.register,
		sync:     w.sync,
		workers:  w.cfg.Workers,
	}.run(ctx)
}

func (w *OwnedWriter[O, AC]) register(enqueue func(string)) []krt.HandlerRegistration {
	return registerSources(w.cfg.Desired, Desired[AC].ResourceName, w.cfg.Live, nil, enqueue)
}

// sync makes the object key match its current desired state.
func (w *OwnedWriter[O, AC]) sync(ctx context.Context, key string) (bool, error) {
	if !w.cfg.IsLeader() {
		return false, nil
	}
	d := w.cfg.Desired.GetKey(key)
	if d == nil {
		// Not desired any more: garbage collection through ownerReferences
		// removes the object; we only forget it.
		ns, name := splitKey(key)
		w.cfg.Owned.Forget(ns, name)
		w.setNotOwned(key, false)
		return false, nil
	}
	// A cached copy that already shows our applied fields as desired saves
	// the read and the write (at a leader's start, every key is synced).
	// Otherwise the live object is read from the API server: a cached copy
	// may be stale, and carries our managedFields only when the Client
	// keeps them (kube.WithAppliedFieldsOf).
	if w.cfg.Live != nil {
		if live := w.cfg.Live.GetKey(key); live != nil && w.cfg.Owned.UpToDate(*live, d.Apply) {
			w.setNotOwned(key, false)
			return false, nil
		}
	}
	res, err := w.cfg.Owned.Apply(ctx, w.cfg.Client(d.Namespace), d.Namespace, d.Name, d.Apply)
	if errors.Is(err, apply.ErrNotOwned) {
		if w.setNotOwned(key, true) {
			slog.Warn("writer: an object with our name is not ours; leaving it alone",
				"writer", w.cfg.Name, "key", key, "error", err)
			if w.cfg.OnNotOwned != nil {
				w.cfg.OnNotOwned(d, err)
			}
		}
		return false, nil // terminal until the desired or live object changes
	}
	if err != nil {
		return false, err
	}
	w.setNotOwned(key, false)
	if res != apply.Unchanged {
		slog.Debug("writer: applied", "writer", w.cfg.Name, "key", key, "result", res.String())
		return true, nil
	}
	return false, nil
}

// setNotOwned records whether key is someone else's object and reports
// whether that is news.
func (w *OwnedWriter[O, AC]) setNotOwned(key string, v bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.notOwned[key] == v {
		return false
	}
	if v {
		w.notOwned[key] = true
	} else {
		delete(w.notOwned, key)
	}
	return true
}
