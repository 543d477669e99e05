// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import "sync"

// ManualSyncer is a Syncer that its owner marks synced once, for inputs whose
// readiness krt cannot see: file mode's first full read, an optional CRD's
// first listing. The zero value is not usable; use NewManualSyncer.
type ManualSyncer struct {
	ch   chan struct{}
	once sync.Once
}

var _ Syncer = (*ManualSyncer)(nil)

// NewManualSyncer returns an unsynced ManualSyncer.
func NewManualSyncer() *ManualSyncer { return &ManualSyncer{ch: make(chan struct{})} }

// MarkSynced marks it synced; later calls do nothing.
func (m *ManualSyncer) MarkSynced() { m.once.Do(func() { close(m.ch) }) }

// HasSynced reports whether MarkSynced was called.
func (m *ManualSyncer) HasSynced() bool {
	select {
	case <-m.ch:
		return true
	default:
		return false
	}
}

// WaitUntilSynced blocks until MarkSynced (true) or stop closes (false).
func (m *ManualSyncer) WaitUntilSynced(stop <-chan struct{}) bool {
	select {
	case <-m.ch:
		return true
	case <-stop:
		return false
	}
}
