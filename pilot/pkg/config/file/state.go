// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"cmp"
	"crypto/sha256"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// fileState is what the Source last committed of one manifest file: the
// stat and time of the read, and the bytes' digest and decoding; fd is nil
// when the file could not be read (unread says why).
type fileState struct {
	stat   fileStat
	readAt time.Time
	sum    [sha256.Size]byte
	fd     *fileDecode
	unread Problem
}

// fileUpdate is a new state of one file, or its deletion.
type fileUpdate struct {
	file    string
	deleted bool
	state   fileState
}

// declAt is one valid declaration of an object: object i of a file's
// decoding.
type declAt struct {
	file string
	i    int
}

// folder is the committed state: every file's last decoding, indexed by
// the objects it declares, and what is accepted. It is changed by commit
// alone, on one goroutine (New's, then Run's).
type folder struct {
	files map[string]*fileState
	// decls holds each object's valid declarations, by file path, then
	// document.
	decls map[objectID][]declAt
	// rejectedIn marks the files whose declaration of an object was
	// rejected; rejected counts them per object.
	rejectedIn map[fileObject]bool
	rejected   map[objectID]int
	// broken marks the files kept whole at their last good state: not
	// readable, or with a document that is not YAML.
	broken   map[string]bool
	accepted map[objectID]object
	// dups are the problems of refused duplicate declarations, per object.
	dups map[objectID][]Problem
	// scanProblems are the listing's (unreadable subfolders).
	scanProblems []Problem
}

func newFolder() *folder {
	return &folder{files: map[string]*fileState{}, decls: map[objectID][]declAt{}, rejectedIn: map[fileObject]bool{},
		rejected: map[objectID]int{}, broken: map[string]bool{}, accepted: map[objectID]object{}, dups: map[objectID][]Problem{}}
}

// commit applies ups, the new states of some files, and decides again, as
// if the whole folder were read, every object that those files declared,
// declare now, or held (a broken file keeps what it last contributed):
//   - every valid object, and when several declarations name it, the one
//     pickOne chooses (the others are problems);
//   - an earlier accepted object whose new version is rejected (a rejected
//     apply leaves the stored object);
//   - every earlier accepted object of a file that cannot be read now or
//     has a document that is not valid YAML (a half-written file).
//
// Objects of a deleted file are gone. No other object's decision can
// change: an object's depends only on the files that declare or held it.
// It returns, per decided object that changed, its previous version (prev,
// absent when new) and its new one (next, absent when gone).
func (f *folder) commit(ups []fileUpdate) (prev, next map[objectID]object) {
	affected := map[objectID]bool{}
	for _, u := range ups {
		if old := f.files[u.file]; old != nil {
			f.forget(u.file, old, affected)
		}
		if u.deleted {
			delete(f.files, u.file)
			continue
		}
		st := u.state
		f.files[u.file] = &st
		f.learn(u.file, &st, affected)
	}
	// A refused duplicate's message names the served declaration and why it
	// wins ("first by path", or "loaded first" once established), which
	// may change without a change of its files: decided again each time,
	// as the whole folder was; there are few.
	for id := range f.dups {
		affected[id] = true
	}
	prev, next = map[objectID]object{}, map[objectID]object{}
	held := func(fo fileObject) bool { return f.broken[fo.file] || f.rejectedIn[fo] }
	var one [1]object // most objects have one declaration: no allocation for it
	for id := range affected {
		cands := f.candidates(id, one[:0])
		p, hasPrev := f.accepted[id]
		var pp *object
		if hasPrev {
			pp = &p
		}
		winner, problems := pickOne(cands, pp, held)
		if len(problems) > 0 {
			f.dups[id] = problems
		} else {
			delete(f.dups, id)
		}
		var n object
		switch {
		case winner >= 0:
			n = stampAccepted(cands[winner], pp)
		case hasPrev && (f.broken[p.ref.file] || f.rejected[id] > 0):
			n = p // kept: its file is broken, or the new version is rejected
		default:
			if hasPrev {
				delete(f.accepted, id)
				prev[id] = p
			}
			continue
		}
		f.accepted[id] = n
		if !hasPrev || p.value != n.value || p.ref != n.ref {
			if hasPrev {
				prev[id] = p
			}
			next[id] = n
		}
	}
	// From now on the committed decodings' values may be stored: a later
	// commit that serves one of them anew stamps a copy.
	for _, u := range ups {
		if st := f.files[u.file]; st != nil && st.fd != nil && !u.deleted {
			for i := range st.fd.objects {
				st.fd.objects[i].reused = true
			}
		}
	}
	return prev, next
}

// forget removes old, file's committed state, from the indexes, marking
// what it declared as affected, and what it held when it was broken.
func (f *folder) forget(file string, old *fileState, affected map[objectID]bool) {
	if f.broken[file] {
		// What a broken file keeps is what it last contributed, whatever
		// its readable documents say now: found by the accepted objects'
		// file. Rare (a file half-written or unreadable), so a pass over
		// the accepted objects rather than an index of them.
		for id, o := range f.accepted {
			if o.ref.file == file {
				affected[id] = true
			}
		}
		delete(f.broken, file)
	}
	if old.fd == nil {
		return
	}
	for i, o := range old.fd.objects {
		affected[o.id] = true
		ds := f.decls[o.id]
		if k := slices.Index(ds, declAt{file: file, i: i}); k >= 0 {
			ds = slices.Delete(ds, k, k+1)
		}
		if len(ds) == 0 {
			delete(f.decls, o.id)
		} else {
			f.decls[o.id] = ds
		}
	}
	for _, id := range old.fd.rejected {
		affected[id] = true
		fo := fileObject{file: file, id: id}
		if f.rejectedIn[fo] {
			delete(f.rejectedIn, fo)
			if f.rejected[id]--; f.rejected[id] == 0 {
				delete(f.rejected, id)
			}
		}
	}
}

// learn adds st, file's new state, to the indexes, marking what it
// declares as affected.
func (f *folder) learn(file string, st *fileState, affected map[objectID]bool) {
	if st.fd == nil || st.fd.broken {
		f.broken[file] = true
	}
	if st.fd == nil {
		return
	}
	for i, o := range st.fd.objects {
		affected[o.id] = true
		d := declAt{file: file, i: i}
		ds := f.decls[o.id]
		k, _ := slices.BinarySearchFunc(ds, d, func(a, b declAt) int {
			return cmp.Or(strings.Compare(a.file, b.file), cmp.Compare(a.i, b.i))
		})
		f.decls[o.id] = slices.Insert(ds, k, d)
	}
	for _, id := range st.fd.rejected {
		affected[id] = true
		fo := fileObject{file: file, id: id}
		if !f.rejectedIn[fo] {
			f.rejectedIn[fo] = true
			f.rejected[id]++
		}
	}
}

// candidates appends to buf id's valid declarations, in file path, then
// document, order.
func (f *folder) candidates(id objectID, buf []object) []object {
	for _, d := range f.decls[id] {
		buf = append(buf, f.files[d.file].fd.objects[d.i])
	}
	return buf
}

// stampAccepted returns c, newly chosen, with the server's fields set
// (stampServerFields) given its previous version prev, if any; when c's
// value is prev's (the document's decoding is the one already served),
// prev as it is, at c's place in its file (a document reused by
// decodeReusing may have moved).
func stampAccepted(c object, prev *object) object {
	if prev != nil && prev.value == c.value {
		p := *prev
		p.ref = c.ref
		return p
	}
	if c.reused {
		// A value decoded earlier, which a collection's readers may hold:
		// stamp a copy.
		if ro, ok := c.value.(runtime.Object); ok {
			c.value = ro.DeepCopyObject()
		}
	}
	stampServerFields(&c, prev)
	return c
}

// problemList is every current problem, sorted: the listing's, each
// file's (unreadable, or its documents'), and the refused duplicates.
func (f *folder) problemList() []Problem {
	ps := slices.Clone(f.scanProblems)
	for _, st := range f.files {
		if st.fd == nil {
			ps = append(ps, st.unread)
		} else {
			ps = append(ps, st.fd.problems...)
		}
	}
	for _, d := range f.dups {
		ps = append(ps, d...)
	}
	sortProblems(ps)
	return ps
}

// heldIDs are the objects a file's committed state declares (accepted or
// rejected) and, when it is broken, those it keeps: what a commit of a new
// state of the file decides again.
func (f *folder) heldIDs(file string) []objectID {
	st := f.files[file]
	if st == nil {
		return nil
	}
	var ids []objectID
	if st.fd != nil {
		for _, o := range st.fd.objects {
			ids = append(ids, o.id)
		}
		ids = append(ids, st.fd.rejected...)
	}
	if f.broken[file] {
		for id, o := range f.accepted {
			if o.ref.file == file {
				ids = append(ids, id)
			}
		}
	}
	return ids
}
