// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package logbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is safe for concurrent Write and String. The zero value is ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the written lines that contain s, in order.
func (b *Buffer) Lines(s string) []string {
	var out []string
	for l := range strings.Lines(b.String()) {
		if strings.Contains(l, s) {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	return out
}
