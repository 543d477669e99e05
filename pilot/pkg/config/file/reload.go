// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// reloader is Run's side of reloads: it finds the files that changed since
// they were committed, decodes each on goroutines of its own, and commits
// each decoded file as soon as no file still being decoded declares an
// object it declares, so a small change is never held behind the
// decoding of a large one, and the outcome is the one of deciding the
// folder whole.
//
// Why that rule gives the same outcome: an object's decision depends only
// on the files that declare it or held it (folder.commit). Files that
// share no object can be committed in any order; files that share one (an
// object moved from one file to another, or declared twice) are committed
// together, so no moment sees the move half done (the object gone from
// one and not yet in the other). What a file being decoded declares is
// known before its documents are validated, from their parsed identities
// (declaredIDs), so waiting on it is waiting for a parse, not a
// validation, unless they share an object.
type reloader struct {
	s       *Source
	ctx     context.Context
	pending map[string]*pendingFile
	events  chan jobEvent
	jobs    sync.WaitGroup
	// scan is the listing's problems, to commit with the next commit.
	scan []Problem
	// rescan is set when a committed file had changed while it was
	// decoded: the caller reads the folder again.
	rescan bool
}

// pendingFile is a file whose new state is not committed yet.
type pendingFile struct {
	stat   fileStat
	readAt time.Time
	// again: the file changed (or was deleted) while it was decoded.
	again bool
	// ids are the objects its committed state declares or holds, and,
	// once known (the job's first message), those its new bytes declare.
	ids   []objectID
	set   map[objectID]bool // ids, once known, for files that are not ready
	known bool
	ready bool
	up    fileUpdate
}

// has reports whether the file's identities hold id.
func (p *pendingFile) has(id objectID) bool {
	if p.set == nil {
		p.set = make(map[objectID]bool, len(p.ids))
		for _, x := range p.ids {
			p.set[x] = true
		}
	}
	return p.set[id]
}

// jobEvent is a decoding goroutine's message: the identities its file
// declares (ids, first), then its decoding (fd).
type jobEvent struct {
	file string
	ids  []objectID
	fd   *fileDecode
}

func newReloader(ctx context.Context, s *Source) *reloader {
	return &reloader{s: s, ctx: ctx, pending: map[string]*pendingFile{}, events: make(chan jobEvent)}
}

// wait returns once every decoding goroutine has returned (ctx ended).
func (r *reloader) wait() { r.jobs.Wait() }

// scanned takes a listing of the folder: each file whose stat differs
// from the committed one's, or that was written so shortly before it was
// read that an equal stat proves nothing (fileStat.settled), is read; if
// its bytes differ it is decoded, while a file already being decoded is
// marked to be read again once committed. Unreadable and deleted files
// need no decoding. It then commits what it can.
func (r *reloader) scanned(sc scan) {
	st := r.s.state
	listed := make(map[string]bool, len(sc.files))
	for i, f := range sc.files {
		listed[f] = true
		stat := sc.stats[i]
		if p := r.pending[f]; p != nil {
			p.again = p.again || p.stat != stat
			continue
		}
		cur := st.files[f]
		if cur != nil && cur.stat == stat && stat.settled(cur.readAt) {
			continue
		}
		readAt := time.Now()
		data, err := os.ReadFile(filepath.Join(r.s.dir, filepath.FromSlash(f)))
		if err != nil {
			unread := Problem{File: f, Message: "cannot read: " + err.Error()}
			if cur != nil && cur.fd == nil && cur.unread == unread {
				cur.stat, cur.readAt = stat, readAt
				continue
			}
			r.ready(f, fileUpdate{file: f, state: fileState{stat: stat, readAt: readAt, unread: unread}})
			continue
		}
		sum := sha256.Sum256(data)
		if cur != nil && cur.fd != nil && cur.sum == sum {
			cur.stat, cur.readAt = stat, readAt // the same bytes: nothing to decide
			continue
		}
		r.decode(f, stat, readAt, data, cur)
	}
	for f := range st.files {
		if listed[f] {
			continue
		}
		if p := r.pending[f]; p != nil {
			p.again = true
			continue
		}
		r.ready(f, fileUpdate{file: f, deleted: true})
	}
	if !slices.Equal(sc.problems, st.scanProblems) {
		r.scan = sc.problems
		if r.scan == nil {
			r.scan = []Problem{}
		}
	}
	r.commit()
}

// ready adds a file whose new state needs no decoding.
func (r *reloader) ready(f string, up fileUpdate) {
	r.pending[f] = &pendingFile{stat: up.state.stat, readAt: up.state.readAt, ids: r.s.state.heldIDs(f),
		known: true, ready: true, up: up}
}

// decode starts decoding file f's new bytes on a goroutine of its own,
// reusing what its committed decoding has of equal documents.
func (r *reloader) decode(f string, stat fileStat, readAt time.Time, data []byte, cur *fileState) {
	var prev *fileDecode
	if cur != nil {
		prev = cur.fd
	}
	r.pending[f] = &pendingFile{stat: stat, readAt: readAt, ids: r.s.state.heldIDs(f)}
	r.s.log.Debug("file: decoding", "file", f, "bytes", len(data))
	r.jobs.Go(func() {
		fd := r.s.decodeReusing(r.ctx, f, data, prev, func(ids []objectID) {
			r.send(jobEvent{file: f, ids: ids})
		})
		if fd != nil {
			r.send(jobEvent{file: f, fd: fd})
		}
	})
}

func (r *reloader) send(ev jobEvent) {
	select {
	case r.events <- ev:
	case <-r.ctx.Done():
	}
}

// received takes a decoding goroutine's message and commits what it can.
func (r *reloader) received(ev jobEvent) {
	p := r.pending[ev.file]
	if ev.fd == nil {
		p.ids = append(p.ids, ev.ids...)
		p.known = true
		r.commit() // files that waited for these identities may go
		return
	}
	p.ready = true
	p.up = fileUpdate{file: ev.file, state: fileState{stat: p.stat, readAt: p.readAt, sum: ev.fd.sum, fd: ev.fd}}
	r.s.log.Debug("file: decoded", "file", ev.file, "since", time.Since(p.readAt).Round(time.Millisecond))
	r.commit()
}

// commit commits every pending file that is ready and shares no object,
// directly or through other pending files, with one that is not; while
// some file's new identities are unknown, nothing (it may share any).
//
// It runs at every message and scan, while a large file may be pending for
// long: a file's identities go into a set once, when known (idSet), and
// each call looks up only the ready files' identities in the sets of the
// files not ready, then groups the ready files among themselves.
func (r *reloader) commit() {
	var waiting []*pendingFile
	for _, p := range r.pending {
		if !p.known {
			return
		}
		if !p.ready {
			waiting = append(waiting, p)
		}
	}
	blocked := map[string]bool{} // ready files that share an object with one not ready
	for f, p := range r.pending {
		if !p.ready {
			continue
		}
		for _, w := range waiting {
			if slices.ContainsFunc(p.ids, w.has) {
				blocked[f] = true
				break
			}
		}
	}
	// Ready files that share an object with a blocked one wait with it.
	if len(blocked) > 0 {
		owner := map[objectID]string{}
		for changed := true; changed; {
			changed = false
			for f, p := range r.pending {
				if !p.ready {
					continue
				}
				for _, id := range p.ids {
					o, seen := owner[id]
					switch {
					case !seen || o == f:
						owner[id] = f
					case blocked[o] != blocked[f]:
						blocked[o], blocked[f], changed = true, true, true
					}
				}
			}
		}
	}
	var ups []fileUpdate
	for f, p := range r.pending {
		if !p.ready || blocked[f] {
			continue
		}
		ups = append(ups, p.up)
		r.rescan = r.rescan || p.again
		delete(r.pending, f)
	}
	if len(ups) == 0 && r.scan == nil {
		return
	}
	slices.SortFunc(ups, func(a, b fileUpdate) int { return strings.Compare(a.file, b.file) })
	r.s.apply(ups, r.scan)
	r.scan = nil
}
