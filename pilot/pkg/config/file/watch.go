// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Run watches the folder and its subfolders until ctx ends, then returns
// nil; it fails only when the watcher cannot be created. It reads the folder
// once at the start (catching changes made since New) and again after every
// burst of filesystem events, once Options.Debounce has passed without one
// (or ten times Debounce after the first event of a steady stream).
//
// A read of the folder lists it and reads only the files whose stat
// changed (or that were written too shortly before their last read for
// their stat to tell), and decodes only those whose bytes changed, each on
// goroutines of its own and, within a file, only the documents whose bytes
// changed (reloader, decodeReusing). Each decoded file is committed as
// soon as no file still being decoded declares an object it declares; a
// file that changes again while it is decoded is read again after its
// commit.
//
// It watches folders, never files, so a file replaced by rename and a
// mounted ConfigMap's symlink swap (..data renamed over) are seen as events of
// the folder. A new subfolder is watched by the reload its creation causes,
// before that reload reads it, so nothing written into it is missed. Call
// Run once.
func (s *Source) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file: watch %s: %w", s.dir, err)
	}
	defer fw.Close()
	ctx, cancel := context.WithCancel(ctx)
	r := newReloader(ctx, s)
	defer r.wait()
	defer cancel()
	w := &folderWatch{s: s, fw: fw, r: r, watched: map[string]bool{}}
	debounce := s.opts.Debounce
	timer := time.NewTimer(debounce)
	timer.Stop()
	defer timer.Stop()
	if !w.reload() {
		timer.Reset(retryMissingFolder)
	}
	var firstPending time.Time // zero: no event pending
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-r.events:
			r.received(ev)
			if r.rescan {
				r.rescan = false
				timer.Reset(0)
			}
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("file: watcher closed")
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
				delete(w.watched, ev.Name) // a removed folder loses its watch
			}
			now := time.Now()
			if firstPending.IsZero() {
				firstPending = now
			}
			timer.Reset(max(0, min(debounce, firstPending.Add(10*debounce).Sub(now))))
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("file: watcher closed")
			}
			s.log.Warn("file: watch error; reloading", "dir", s.dir, "error", err)
			timer.Reset(debounce) // an overflow may have lost events
		case <-timer.C:
			firstPending = time.Time{}
			if !w.reload() {
				// The folder is gone (deleted, or renamed away) and so are
				// its watches: look again until it is back.
				timer.Reset(retryMissingFolder)
			}
		}
	}
}

// folderWatch keeps an fsnotify watch on every folder of the tree.
type folderWatch struct {
	s       *Source
	fw      *fsnotify.Watcher
	r       *reloader
	watched map[string]bool // absolute folder paths
	missing bool            // the folder could not be read at the last reload
}

// retryMissingFolder is how often Run looks for a folder that has
// disappeared.
const retryMissingFolder = time.Second

// reload watches every folder, then lists the tree and reads what changed
// (reloader.scanned): a file written in between is both read and reported
// by an event (one extra reload, nothing missed). It reports false when
// the folder cannot be read: the last configuration stays, every watch is
// forgotten (a deleted folder's watches died with it; a recreated one
// needs new ones), and the caller retries.
func (w *folderWatch) reload() bool {
	if sc, err := listManifests(w.s.dir); err == nil {
		w.add(sc.dirs)
	}
	sc, err := listManifests(w.s.dir)
	if err != nil {
		if !w.missing {
			w.s.log.Warn("file: cannot read folder; keeping the last configuration until it is back", "dir", w.s.dir, "error", err)
		}
		w.missing = true
		for d := range w.watched {
			_ = w.fw.Remove(d)
		}
		clear(w.watched)
		return false
	}
	w.r.scanned(sc)
	if w.missing {
		w.s.log.Info("file: folder is back; reloaded", "dir", w.s.dir)
		w.missing = false
	}
	w.add(sc.dirs)
	return true
}

func (w *folderWatch) add(dirs []string) {
	for _, d := range dirs {
		if w.watched[d] {
			continue
		}
		if err := w.fw.Add(d); err != nil {
			w.s.log.Warn("file: cannot watch folder", "dir", d, "error", err)
			continue
		}
		w.watched[d] = true
	}
}
