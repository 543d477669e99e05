// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package writer

import (
	"context"
	"errors"
	"log/slog"

	"k8s.io/client-go/util/workqueue"

	"github.com/infermesh/infermesh/pkg/kube/apply"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// OwnedStatusConfig configures an OwnedStatusWriter: the status of objects
// whose status only we write (our Gateways and GatewayClasses), kept equal to
// desired values of type S. All fields but Live and RateLimiter are required.
type OwnedStatusConfig[O apply.Object, S any, AC any] struct {
	// Name names the writer in logs and the workqueue.
	Name string
	// Desired is the desired status per object, keyed "namespace/name" (or
	// "name" for cluster-scoped objects).
	Desired krt.Collection[S]
	// Live, if set, is a collection of the live objects; a change of one
	// whose key is desired enqueues it (someone may have changed our status).
	Live krt.Collection[O]
	// Status does the writing: server-side apply of the status subresource.
	Status apply.OwnedStatus[O, AC]
	// Client returns the typed client for a namespace ("" for
	// cluster-scoped kinds).
	Client func(namespace string) apply.StatusClient[O, AC]
	// Build turns the desired status into the apply configuration to write,
	// given the live object (to keep the lastTransitionTime of unchanged
	// conditions and stamp changed ones).
	Build func(live O, desired S) (AC, error)
	// IsLeader is checked before each write.
	IsLeader func() bool
	// RateLimiter returns a new rate limiter for each leadership term.
	// Default: workqueue.DefaultTypedControllerRateLimiter.
	RateLimiter func() workqueue.TypedRateLimiter[string]
	// Workers is how many keys are synced at once; default DefaultWorkers.
	Workers int
}

// OwnedStatusWriter applies the desired status of objects whose status we
// own, while leading. When the desired status is gone (the object is no
// longer ours) nothing is written: the status stays as we last wrote it, for
// the next owner to replace.
type OwnedStatusWriter[O apply.Object, S any, AC any] struct {
	cfg OwnedStatusConfig[O, S, AC]
}

// NewOwnedStatusWriter validates cfg and returns a writer. It writes nothing
// until Run.
func NewOwnedStatusWriter[O apply.Object, S any, AC any](cfg OwnedStatusConfig[O, S, AC]) (*OwnedStatusWriter[O, S, AC], error) {
	if cfg.Name == "" || cfg.Desired == nil || cfg.Status.ExtractStatus == nil || cfg.Status.FieldManager == "" ||
		cfg.Client == nil || cfg.Build == nil || cfg.IsLeader == nil {
		return nil, errors.New("writer: OwnedStatusConfig needs Name, Desired, Status, Client, Build and IsLeader")
	}
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	return &OwnedStatusWriter[O, S, AC]{cfg: cfg}, nil
}

// Run writes until ctx ends: one leadership term. Pass it to
// Elector.AddRunFunction.
func (w *OwnedStatusWriter[O, S, AC]) Run(ctx context.Context) {
	term{
		name:     w.cfg.Name,
		limiter:  w.cfg.RateLimiter(),
		synced:   w.cfg.Desired,
		register: w.register,
		sync:     w.sync,
		workers:  w.cfg.Workers,
	}.run(ctx)
}

func (w *OwnedStatusWriter[O, S, AC]) register(enqueue func(string)) []krt.HandlerRegistration {
	return registerSources(w.cfg.Desired, krt.GetKey[S], w.cfg.Live, nil, enqueue)
}

func (w *OwnedStatusWriter[O, S, AC]) sync(ctx context.Context, key string) (bool, error) {
	if !w.cfg.IsLeader() {
		return false, nil
	}
	d := w.cfg.Desired.GetKey(key)
	if d == nil {
		return false, nil
	}
	ns, name := splitKey(key)
	wrote, err := w.cfg.Status.ApplyFrom(ctx, w.cfg.Client(ns), ns, name, func(live O) (AC, error) {
		return w.cfg.Build(live, *d)
	})
	if wrote {
		slog.Debug("writer: status applied", "writer", w.cfg.Name, "key", key)
	}
	return wrote, err
}
