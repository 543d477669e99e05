// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package epp

import (
	"strconv"
	"sync"
)

// logBuffer is an io.Writer that keeps the last max bytes written to it, for
// a child's stdout and stderr. Safe for concurrent use.
type logBuffer struct {
	mu      sync.Mutex
	max     int
	dropped int
	buf     []byte
}

func newLogBuffer(max int) *logBuffer { return &logBuffer{max: max} }

// Write appends b, dropping the oldest bytes beyond max. It never fails.
func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	if over := len(l.buf) - l.max; over > 0 {
		l.dropped += over
		l.buf = append(l.buf[:0], l.buf[over:]...)
	}
	return len(b), nil
}

// String returns what is kept, with a note of how much was dropped.
func (l *logBuffer) String() string { return l.Tail(l.max) }

// Tail returns at most the last n bytes kept, with a note of how much is cut.
func (l *logBuffer) Tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, cut := l.buf, l.dropped
	if len(b) > n {
		cut += len(b) - n
		b = b[len(b)-n:]
	}
	if cut == 0 {
		return string(b)
	}
	return "(first " + strconv.Itoa(cut) + " bytes cut)\n" + string(b)
}
