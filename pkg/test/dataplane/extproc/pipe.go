// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"io"
	"net/http"
	"sync"
)

// bodyPipe carries a body that the processor streams back (the
// FULL_DUPLEX_STREAMED streamed_response chunks) to its reader: the
// upstream for the request, the caller for the response. Writes never
// block (Envoy buffers injected data too); Read blocks until data, the end,
// or an error. Trailers are copied into the reader's map before io.EOF is
// returned, as net/http does.
type bodyPipe struct {
	mu       sync.Mutex
	cond     *sync.Cond
	chunks   [][]byte
	done     bool
	err      error // io.EOF on a clean end
	trailers http.Header
	onClose  func() // called once when the reader closes early
	closed   bool
}

func newBodyPipe(trailers http.Header, onClose func()) *bodyPipe {
	p := &bodyPipe{trailers: trailers, onClose: onClose}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// write queues b; after finish it is dropped.
func (p *bodyPipe) write(b []byte) {
	if len(b) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.chunks = append(p.chunks, append([]byte(nil), b...))
	p.cond.Broadcast()
}

// finish ends the body: err nil means a clean end (io.EOF after the queued
// data), with trailers merged into the reader's trailer map.
func (p *bodyPipe) finish(err error, trailers http.Header) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	if err == nil {
		err = io.EOF
		for k, vs := range trailers {
			p.trailers[k] = append([]string(nil), vs...)
		}
	}
	p.done, p.err = true, err
	p.cond.Broadcast()
}

func (p *bodyPipe) finished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *bodyPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.chunks) == 0 && !p.done && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return 0, io.ErrClosedPipe
	}
	if len(p.chunks) == 0 {
		return 0, p.err
	}
	n := copy(b, p.chunks[0])
	if n == len(p.chunks[0]) {
		p.chunks = p.chunks[1:]
	} else {
		p.chunks[0] = p.chunks[0][n:]
	}
	return n, nil
}

// Close is the reader giving up early: the request is over.
func (p *bodyPipe) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	if !already && p.onClose != nil {
		p.onClose()
	}
	return nil
}

func newStaticBody(b []byte) *bodyPipe {
	p := newBodyPipe(http.Header{}, nil)
	p.write(b)
	p.finish(nil, nil)
	return p
}
