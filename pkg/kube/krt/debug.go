// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// DebugHandler collects collections (WithDebugging) and serves their dump as
// JSON: the body of pilot-discovery's /debug/krtz. A collection leaves the
// handler when it stops.
type DebugHandler struct {
	mu    sync.Mutex
	colls map[uint64]debuggable
}

// NewDebugHandler returns an empty handler.
func NewDebugHandler() *DebugHandler {
	return &DebugHandler{colls: map[uint64]debuggable{}}
}

// CollectionDump is one collection in the debug dump.
type CollectionDump struct {
	Name   string `json:"name"`
	UID    uint64 `json:"uid"`
	Type   string `json:"type"`
	Synced bool   `json:"synced"`
	// Keys of every object, sorted.
	Keys []string `json:"keys"`
	// Transformations is the number of transformation runs (derived only).
	Transformations uint64 `json:"transformations,omitempty"`
	// Derived has the per-input view of a derived collection.
	Derived *DerivedDump `json:"derived,omitempty"`
}

// DerivedDump describes a derived collection's inputs.
type DerivedDump struct {
	// Sources are the collections it is registered on, the parent first.
	Sources []SourceDump `json:"sources"`
	// Inputs maps each input key to the outputs it produced and the reads its
	// last transformation run recorded.
	Inputs map[string]InputDump `json:"inputs"`
}

// SourceDump is one collection a derived collection is registered on.
type SourceDump struct {
	Name   string `json:"name"`
	Synced bool   `json:"synced"`
	// Dependents is the number of (input, dependency) entries filed in the
	// reverse index for this source.
	Dependents int `json:"dependents"`
}

// InputDump is what one input of a derived collection produced and read.
type InputDump struct {
	Outputs      []string         `json:"outputs,omitempty"`
	Dependencies []DependencyDump `json:"dependencies,omitempty"`
}

// DependencyDump is one recorded Fetch: the collection and the filter.
type DependencyDump struct {
	Collection string `json:"collection"`
	Filter     string `json:"filter"`
}

type debuggable interface {
	dump() CollectionDump
}

func registerDebug[T any](h *DebugHandler, s *store[T]) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.colls[s.uid] = s
	h.mu.Unlock()
	s.onClose = append(s.onClose, func() {
		h.mu.Lock()
		delete(h.colls, s.uid)
		h.mu.Unlock()
	})
}

// Dump returns every collection's dump, sorted by name then uid.
func (h *DebugHandler) Dump() []CollectionDump {
	h.mu.Lock()
	colls := make([]debuggable, 0, len(h.colls))
	for _, c := range h.colls {
		colls = append(colls, c)
	}
	h.mu.Unlock()
	out := make([]CollectionDump, len(colls))
	for i, c := range colls {
		out[i] = c.dump()
	}
	slices.SortFunc(out, func(a, b CollectionDump) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.UID, b.UID)
	})
	return out
}

// ServeHTTP writes Dump as indented JSON.
func (h *DebugHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(h.Dump())
}

func (s *store[T]) dump() CollectionDump {
	s.mu.RLock()
	keys := make([]string, 0, len(s.objs))
	for k := range s.objs {
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	slices.Sort(keys)
	d := CollectionDump{
		Name:            s.name,
		UID:             s.uid,
		Type:            s.ti.name,
		Synced:          s.HasSynced(),
		Keys:            keys,
		Transformations: s.transformations.Load(),
	}
	if s.describe != nil {
		d.Derived = s.describe()
	}
	return d
}

// describeTimeout bounds how long a dump waits for a busy engine.
const describeTimeout = 5 * time.Second

// describe returns the engine's per-input view. It runs on the engine's
// goroutine (the only one that may read its state) and waits for it; nil if
// the engine has stopped or is busy for longer than describeTimeout.
func (e *engine[I, O, S]) describe() *DerivedDump {
	res := make(chan *DerivedDump, 1)
	e.q.push(engineItem{run: func() { res <- e.describeLocal() }})
	t := time.NewTimer(describeTimeout)
	defer t.Stop()
	select {
	case d := <-res:
		return d
	case <-e.stop:
		return nil
	case <-t.C:
		return nil
	}
}

func (e *engine[I, O, S]) describeLocal() *DerivedDump {
	d := &DerivedDump{Inputs: make(map[string]InputDump, len(e.inputs))}
	for _, src := range e.sources {
		d.Sources = append(d.Sources, SourceDump{Name: src.name, Synced: src.synced, Dependents: src.rev.size()})
	}
	// The parent first, then by name.
	slices.SortFunc(d.Sources, func(a, b SourceDump) int {
		switch {
		case a.Name == e.primary.name:
			return -1
		case b.Name == e.primary.name:
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	for k, st := range e.inputs {
		in := InputDump{Outputs: slices.Clone(st.out)}
		for i := range st.deps {
			in.Dependencies = append(in.Dependencies, DependencyDump{
				Collection: st.deps[i].src.name,
				Filter:     st.deps[i].f.String(),
			})
		}
		d.Inputs[k] = in
	}
	return d
}

// CollectionStats are counters of one collection, for tests and benchmarks.
type CollectionStats struct {
	// Size is the number of objects.
	Size int
	// Transformations is the number of transformation runs so far (derived
	// collections only).
	Transformations uint64
	// Registrations is the number of live registrations on the collection
	// (handlers and derived collections).
	Registrations int
	// Examined is the number of objects fetches of the collection have
	// tested against their filters (read from a key, an index, label or
	// selector bucket, or a scan).
	Examined uint64
}

// Stats returns c's counters. c must be a collection of this package (any
// Collection[T], StaticCollection[T] or Singleton[T]); Stats panics otherwise.
func Stats(c any) CollectionStats {
	return c.(interface{ stats() CollectionStats }).stats()
}

func (s *store[T]) stats() CollectionStats {
	s.mu.RLock()
	n := len(s.objs)
	s.mu.RUnlock()
	return CollectionStats{Size: n, Transformations: s.transformations.Load(), Registrations: s.registrationCount(), Examined: s.examined.Load()}
}
