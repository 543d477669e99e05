// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// errClosed is returned to requests still waiting or held when the server closes.
var errClosed = errors.New("vllmsim: server closed")

// Stats is a snapshot of a server's load.
type Stats struct {
	Running  int // requests admitted and not yet answered
	Waiting  int // requests queued for admission
	Received int // inference requests received, rejected ones included
	Served   int // inference requests answered with 200
	// UsedBlocks is the number of KV-cache blocks held by running requests.
	UsedBlocks int
	// KVCacheUsage is UsedBlocks / NumGPUBlocks, capped at 1 (a fraction, 0..1).
	KVCacheUsage float64
	// RunningLoRAs and WaitingLoRAs are the sorted, distinct adapters of the
	// running and waiting requests (the base model is not listed).
	RunningLoRAs []string
	WaitingLoRAs []string
	// LoRAChangedAt is when RunningLoRAs or WaitingLoRAs last changed (the
	// server's start if never); lora_requests_info reports it in Unix seconds.
	LoRAChangedAt time.Time
	// Held is the number of running requests blocked at each closed hold gate,
	// by gate id; gates holding nothing are left out.
	Held map[string]int
}

// job is one inference request in the engine.
type job struct {
	lora     string        // adapter, "" for the base model
	blocks   int           // KV blocks it needs while running
	admitted chan struct{} // closed when it moves from waiting to running
}

// gate is one x-sim-hold gate.
type gate struct {
	open chan struct{} // closed by Release
	held int           // requests blocked on it now
}

// engine is the admission queue, the running set, and the hold gates. All
// state sits under mu; every change closes and replaces changed.
type engine struct {
	maxRunning, maxLoRAs, numBlocks int
	now                             func() time.Time

	mu            sync.Mutex
	waiting       []*job
	running       map[*job]struct{}
	runningLoRA   map[string]int // adapter -> running requests using it
	usedBlocks    int
	received      int
	served        int
	gates         map[string]*gate
	loraKey       string    // running|waiting adapter sets, to detect changes
	loraChangedAt time.Time // when loraKey last changed
	changed       chan struct{}
	closing       chan struct{}
	closed        bool
}

func newEngine(cfg Config) *engine {
	return &engine{
		maxRunning:    cfg.MaxRunning,
		maxLoRAs:      cfg.MaxLoRAs,
		numBlocks:     cfg.NumGPUBlocks,
		now:           cfg.Now,
		running:       map[*job]struct{}{},
		runningLoRA:   map[string]int{},
		gates:         map[string]*gate{},
		loraKey:       "|",
		loraChangedAt: cfg.Now(),
		changed:       make(chan struct{}),
		closing:       make(chan struct{}),
	}
}

// changedLocked wakes every WaitUntil and refreshes the LoRA timestamp.
func (e *engine) changedLocked() {
	running, waiting := e.loraSetsLocked()
	if key := strings.Join(running, ",") + "|" + strings.Join(waiting, ","); key != e.loraKey {
		e.loraKey = key
		e.loraChangedAt = e.now()
	}
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *engine) loraSetsLocked() (running, waiting []string) {
	for l := range e.runningLoRA {
		running = append(running, l)
	}
	for _, j := range e.waiting {
		if j.lora != "" && !slices.Contains(waiting, j.lora) {
			waiting = append(waiting, j.lora)
		}
	}
	slices.Sort(running)
	slices.Sort(waiting)
	return running, waiting
}

// receive counts an inference request.
func (e *engine) receive() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.received++
	e.changedLocked()
}

// admit queues j and blocks until it runs, ctx ends, or the server closes. On
// success the caller must call finish(j).
func (e *engine) admit(ctx context.Context, j *job) error {
	j.admitted = make(chan struct{})
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	e.waiting = append(e.waiting, j)
	e.scheduleLocked()
	e.changedLocked()
	e.mu.Unlock()

	var err error
	select {
	case <-j.admitted:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-e.closing:
		err = errClosed
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if i := slices.Index(e.waiting, j); i >= 0 {
		e.waiting = slices.Delete(e.waiting, i, i+1)
		e.scheduleLocked() // a skipped request behind it may fit now
	} else {
		e.leaveLocked(j) // admitted while we were giving up
	}
	e.changedLocked()
	return err
}

// fitsLocked reports whether j may start running now.
func (e *engine) fitsLocked(j *job) bool {
	if len(e.running) == 0 {
		return true
	}
	if e.maxRunning > 0 && len(e.running) >= e.maxRunning {
		return false
	}
	if e.usedBlocks+j.blocks > e.numBlocks {
		return false
	}
	return j.lora == "" || e.runningLoRA[j.lora] > 0 || len(e.runningLoRA) < e.maxLoRAs
}

// scheduleLocked admits, in arrival order, every waiting job that fits. A
// closed engine admits nothing: a held request that Close ends leaves the
// running set, and the job behind it must fail with errClosed, not start.
func (e *engine) scheduleLocked() {
	if e.closed {
		return
	}
	kept := e.waiting[:0]
	for _, j := range e.waiting {
		if !e.fitsLocked(j) {
			kept = append(kept, j)
			continue
		}
		e.running[j] = struct{}{}
		e.usedBlocks += j.blocks
		if j.lora != "" {
			e.runningLoRA[j.lora]++
		}
		close(j.admitted)
	}
	clear(e.waiting[len(kept):])
	e.waiting = kept
}

// leaveLocked removes a running job and admits whatever now fits.
func (e *engine) leaveLocked(j *job) {
	if _, ok := e.running[j]; !ok {
		return
	}
	delete(e.running, j)
	e.usedBlocks -= j.blocks
	if j.lora != "" {
		if e.runningLoRA[j.lora]--; e.runningLoRA[j.lora] == 0 {
			delete(e.runningLoRA, j.lora)
		}
	}
	e.scheduleLocked()
}

// finish ends a running job; served says it was answered with 200.
func (e *engine) finish(j *job, served bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leaveLocked(j)
	if served {
		e.served++
	}
	e.changedLocked()
}

// hold blocks while gate id is closed. An empty id never blocks.
func (e *engine) hold(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	g := e.gateLocked(id)
	select {
	case <-g.open:
		e.mu.Unlock()
		return nil
	default:
	}
	g.held++
	e.changedLocked()
	e.mu.Unlock()

	var err error
	select {
	case <-g.open:
	case <-ctx.Done():
		err = ctx.Err()
	case <-e.closing:
		err = errClosed
	}
	e.mu.Lock()
	g.held--
	e.changedLocked()
	e.mu.Unlock()
	return err
}

// delay waits d, or less if ctx ends or the server closes.
func (e *engine) delay(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.closing:
		return errClosed
	}
}

func (e *engine) gateLocked(id string) *gate {
	g, ok := e.gates[id]
	if !ok {
		g = &gate{open: make(chan struct{})}
		e.gates[id] = g
	}
	return g
}

// release opens gate id for good.
func (e *engine) release(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.gateLocked(id)
	select {
	case <-g.open:
	default:
		close(g.open)
	}
	e.changedLocked()
}

// close fails every waiting and held request and refuses new ones.
func (e *engine) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	close(e.closing)
	e.changedLocked()
}

// snapshot returns the current Stats and the channel closed at the next change.
func (e *engine) snapshot() (Stats, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Stats{
		Running:       len(e.running),
		Waiting:       len(e.waiting),
		Received:      e.received,
		Served:        e.served,
		UsedBlocks:    e.usedBlocks,
		LoRAChangedAt: e.loraChangedAt,
		Held:          map[string]int{},
	}
	st.KVCacheUsage = min(1, float64(e.usedBlocks)/float64(e.numBlocks))
	st.RunningLoRAs, st.WaitingLoRAs = e.loraSetsLocked()
	for id, g := range e.gates {
		if g.held > 0 {
			st.Held[id] = g.held
		}
	}
	return st, e.changed
}

// waitUntil blocks until cond(Stats) holds or ctx ends.
func (e *engine) waitUntil(ctx context.Context, cond func(Stats) bool) (Stats, error) {
	for {
		st, changed := e.snapshot()
		if cond(st) {
			return st, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}
