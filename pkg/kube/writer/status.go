// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package writer

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/status"
)

// StatusConfig configures a StatusWriter for one kind of shared object O
// (for example *inferencev1.InferencePool) whose status.parents entries are
// of type P. All fields but Live and RateLimiter are required.
type StatusConfig[O metav1.Object, P any] struct {
	// Name names the writer in logs and the workqueue.
	Name string
	// Desired is our entries per object.
	Desired krt.Collection[DesiredStatus[P]]
	// Live, if set, is a collection of the live objects; a change of one
	// whose key is desired enqueues it (someone may have dropped our
	// entries), and each sync reads it first, going to Get only when the
	// object is absent or the cached copy was stale (409 Conflict).
	Live krt.Collection[O]
	// Controller is our controllerName; entries with it are ours.
	Controller string
	// Access reads entries for status.MergeParents.
	Access status.ParentAccess[P]
	// Get reads the live object from the API server (not a cache: after a
	// conflict the resourceVersion must be current).
	Get func(ctx context.Context, namespace, name string) (O, error)
	// Parents returns the live object's status.parents.
	Parents func(obj O) []P
	// WithParents returns a copy of obj with status.parents replaced; obj
	// must not be modified.
	WithParents func(obj O, parents []P) O
	// UpdateStatus writes obj through the status subresource, carrying its
	// resourceVersion.
	UpdateStatus func(ctx context.Context, obj O) error
	// IsLeader is checked before each write.
	IsLeader func() bool
	// RateLimiter returns a new rate limiter for each leadership term.
	// Default: workqueue.DefaultTypedControllerRateLimiter.
	RateLimiter func() workqueue.TypedRateLimiter[string]
	// Workers is how many keys are synced at once; default DefaultWorkers.
	Workers int
}

// StatusWriter keeps our entries of shared status.parents lists equal to the
// desired ones, while leading, without touching anyone else's entries.
type StatusWriter[O metav1.Object, P any] struct {
	cfg StatusConfig[O, P]
}

// NewStatusWriter validates cfg and returns a writer. It writes nothing
// until Run.
func NewStatusWriter[O metav1.Object, P any](cfg StatusConfig[O, P]) (*StatusWriter[O, P], error) {
	if cfg.Name == "" || cfg.Desired == nil || cfg.Controller == "" || cfg.Access.Controller == nil ||
		cfg.Access.Key == nil || cfg.Access.Conditions == nil || cfg.Get == nil || cfg.Parents == nil ||
		cfg.WithParents == nil || cfg.UpdateStatus == nil || cfg.IsLeader == nil {
		return nil, errors.New("writer: StatusConfig needs Name, Desired, Controller, Access, Get, Parents, WithParents, UpdateStatus and IsLeader")
	}
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	return &StatusWriter[O, P]{cfg: cfg}, nil
}

// Run writes until ctx ends: one leadership term. Pass it to
// Elector.AddRunFunction.
func (w *StatusWriter[O, P]) Run(ctx context.Context) {
	term{
		name:     w.cfg.Name,
		limiter:  w.cfg.RateLimiter(),
		synced:   w.cfg.Desired,
		register: w.register,
		sync:     w.sync,
		workers:  w.cfg.Workers,
	}.run(ctx)
}

func (w *StatusWriter[O, P]) register(enqueue func(string)) []krt.HandlerRegistration {
	// Deletes of desired statuses are enqueued too: our entries are then
	// removed. Live objects that still carry an entry of ours are enqueued
	// whether desired or not, also at the start of a term, so entries that
	// stopped being desired while no replica led are removed too.
	return registerSources(w.cfg.Desired, DesiredStatus[P].ResourceName, w.cfg.Live, w.hasOurEntry, enqueue)
}

// hasOurEntry reports whether obj's status.parents has an entry with our
// controllerName.
func (w *StatusWriter[O, P]) hasOurEntry(obj O) bool {
	ps := w.cfg.Parents(obj)
	for i := range ps {
		if w.cfg.Access.Controller(&ps[i]) == w.cfg.Controller {
			return true
		}
	}
	return false
}

// sync writes our entries of key's status.parents: the desired ones, or none
// when nothing is desired.
func (w *StatusWriter[O, P]) sync(ctx context.Context, key string) (bool, error) {
	if !w.cfg.IsLeader() {
		return false, nil
	}
	ns, name := splitKey(key)
	var desired []P
	if d := w.cfg.Desired.GetKey(key); d != nil {
		desired = stampTransitionTimes(d.Parents, w.cfg.Access, metav1.Now())
	}
	// The first read comes from the Live collection when it holds the
	// object (a sync that finds nothing to change then costs no request);
	// a stale copy makes UpdateStatus fail with 409 Conflict, and the retry
	// reads the API server.
	first := true
	wrote, err := status.UpdateShared(ctx, key,
		func(ctx context.Context) (O, error) {
			if first && w.cfg.Live != nil {
				first = false
				if o := w.cfg.Live.GetKey(key); o != nil {
					return *o, nil
				}
			}
			return w.cfg.Get(ctx, ns, name)
		},
		func(live O) (O, bool) {
			current := w.cfg.Parents(live)
			merged := status.MergeParents(current, desired, w.cfg.Controller, w.cfg.Access)
			if equality.Semantic.DeepEqual(current, merged) ||
				(len(current) == 0 && len(merged) == 0) {
				return live, false
			}
			return w.cfg.WithParents(live, merged), true
		},
		func(ctx context.Context, obj O) error {
			if !w.cfg.IsLeader() {
				return errNotLeader
			}
			return w.cfg.UpdateStatus(ctx, obj)
		})
	if errors.Is(err, errNotLeader) {
		return false, nil
	}
	if wrote {
		slog.Debug("writer: status written", "writer", w.cfg.Name, "key", key)
	}
	return wrote, err
}

// errNotLeader stops a status retry loop when leadership ended mid-write.
var errNotLeader = errors.New("writer: not leader")

// stampTransitionTimes returns a copy of desired in which every condition
// with a zero lastTransitionTime has now. Desired collections leave the time
// zero so that a recomputation yields an equal value (and no event); the
// merge then keeps the live time of every condition whose status is
// unchanged, so now is written only for conditions that changed or are new.
func stampTransitionTimes[P any](desired []P, a status.ParentAccess[P], now metav1.Time) []P {
	out := slices.Clone(desired)
	for i := range out {
		conds := a.Conditions(&out[i])
		*conds = status.StampTransitionTimes(*conds, now)
	}
	return out
}
