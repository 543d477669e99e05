// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"fmt"
	"time"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Client-side rate limits used when no option sets them.
//
// client-go's defaults (5 QPS, burst 10) assume a controller that writes
// rarely. This control plane writes, per InferencePool, a shadow Service
// (server-side apply) and a status entry (read-modify-write), and per route a
// status entry: a cold start or a leader handover with 1,000 pools is about
// 2,000-3,000 writes, which take 7-10 minutes at 5 QPS and 20-30 s at 100.
// Burst 200 absorbs the watch re-establishments after an API server restart
// (one list and one watch per informer) without queueing writes behind them.
// The API server still protects itself with API Priority and Fairness; these
// limits only stop us queueing behind a limiter of our own.
const (
	DefaultQPS   float32 = 100
	DefaultBurst int     = 200
)

// Option configures a Client at construction.
type Option func(*options)

type options struct {
	qps    float32
	burst  int
	resync time.Duration
	debug  *krt.DebugHandler
	// appliedFieldsOf are the field managers whose server-side apply
	// entries the informers keep (WithAppliedFieldsOf).
	appliedFieldsOf []string
}

// WithQPS sets the sustained rate of requests to the API server, shared by all
// clientsets of the Client (one token bucket). Default DefaultQPS.
func WithQPS(qps float32) Option {
	return func(o *options) { o.qps = qps }
}

// WithBurst sets how many requests may exceed the QPS rate at once. Default
// DefaultBurst.
func WithBurst(burst int) Option {
	return func(o *options) { o.burst = burst }
}

// WithResync sets the informers' resync period. Default 0: no resync. Resyncs
// reach krt collections as updates with an unchanged resourceVersion, which
// they drop, so a resync costs CPU and buys nothing unless a handler outside
// krt relies on it.
func WithResync(d time.Duration) Option {
	return func(o *options) { o.resync = d }
}

// WithDebugging adds every collection the Client creates to h (served as
// /debug/krtz). A nil h is ignored.
func WithDebugging(h *krt.DebugHandler) Option {
	return func(o *options) { o.debug = h }
}

// WithAppliedFieldsOf makes the informers keep, of each object's
// managedFields, the server-side apply entries of these field managers,
// and strip every other entry as they do without it. A writer that applies
// objects as one of these managers can then tell from the cached object
// that its fields are already as desired (apply.Owned.UpToDate), without
// reading the object from the API server. Only objects such a manager
// applied carry the entry, so the informers' memory grows by that much.
func WithAppliedFieldsOf(managers ...string) Option {
	return func(o *options) { o.appliedFieldsOf = append(o.appliedFieldsOf, managers...) }
}

func buildOptions(opts []Option) (options, error) {
	o := options{qps: DefaultQPS, burst: DefaultBurst}
	for _, f := range opts {
		f(&o)
	}
	if o.qps <= 0 {
		return o, fmt.Errorf("kube: QPS must be positive, got %v", o.qps)
	}
	if o.burst < 1 {
		return o, fmt.Errorf("kube: burst must be at least 1, got %d", o.burst)
	}
	if o.resync < 0 {
		return o, fmt.Errorf("kube: resync period must not be negative, got %v", o.resync)
	}
	return o, nil
}
