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
	w := &folderWatch{s: s, fw: fw, watched: map[string]bool{}}
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
	watched map[string]bool // absolute folder paths
	missing bool            // the folder could not be read at the last reload
}

// retryMissingFolder is how often Run looks for a folder that has
// disappeared.
const retryMissingFolder = time.Second

// reload watches every folder, then rereads the tree: a file written in
// between is both read and reported by an event (one extra reload, nothing
// missed). It reports false when the folder cannot be read: the last
// configuration stays, every watch is forgotten (a deleted folder's watches
// died with it; a recreated one needs new ones), and the caller retries.
func (w *folderWatch) reload() bool {
	if sc, err := listManifests(w.s.dir); err == nil {
		w.add(sc.dirs)
	}
	dirs, err := w.s.reload()
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
	if w.missing {
		w.s.log.Info("file: folder is back; reloaded", "dir", w.s.dir)
		w.missing = false
	}
	w.add(dirs)
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
