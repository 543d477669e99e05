// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// scan is one listing of the watched folder.
type scan struct {
	files    []string // manifest paths relative to the root, slash-separated, sorted
	stats    []fileStat
	dirs     []string // absolute folders to watch: the root and its subfolders
	problems []Problem
}

// manifestExt reports whether name is a manifest by its extension.
func manifestExt(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// listManifests walks root. It skips every name that starts with "." (a
// mounted ConfigMap's ..data and ..<timestamp> folders: the top-level
// symlinks into them are what is read), reads symlinks to files through the
// link, and does not descend into symlinks to folders (no cycles). Only an
// unreadable root is an error; an unreadable subfolder is a problem. Each
// file's stat (through a symlink, of its target) is taken with the listing.
func listManifests(root string) (scan, error) {
	var s scan
	if _, err := os.ReadDir(root); err != nil {
		return s, err
	}
	stats := map[string]fileStat{}
	var walk func(rel string)
	walk = func(rel string) {
		dir := filepath.Join(root, filepath.FromSlash(rel))
		entries, err := os.ReadDir(dir)
		if err != nil {
			s.problems = append(s.problems, Problem{File: rel, Message: "cannot read folder: " + err.Error()})
			return
		}
		s.dirs = append(s.dirs, dir)
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			child := path.Join(rel, name)
			mode := e.Type()
			var info fs.FileInfo
			if mode&fs.ModeSymlink != 0 {
				var err error
				info, err = os.Stat(filepath.Join(dir, name))
				if err != nil || info.IsDir() {
					// A dangling link (a swap in progress) or a linked
					// folder: skipped. The swap's own event reloads.
					continue
				}
				mode = info.Mode()
			}
			switch {
			case mode.IsDir():
				walk(child)
			case mode.IsRegular() && manifestExt(name):
				if info == nil {
					var err error
					if info, err = e.Info(); err != nil {
						continue // gone since the folder was read; its event reloads
					}
				}
				s.files = append(s.files, child)
				stats[strings.TrimPrefix(child, "./")] = statOf(info)
			}
		}
	}
	walk(".")
	for i, f := range s.files {
		s.files[i] = strings.TrimPrefix(f, "./")
	}
	slices.Sort(s.files)
	s.stats = make([]fileStat, len(s.files))
	for i, f := range s.files {
		s.stats[i] = stats[f]
	}
	return s, nil
}

// fileStat is what a stat says of a file's content: which file it is
// (device and inode: a rename over it or a symlink swap makes another), its
// size and its modification and change times in nanoseconds. A write
// changes the times, but only to the file system's clock tick (a few
// milliseconds), so an equal stat proves nothing about a file written
// within a tick of being read (see settled).
type fileStat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

// racyWindow is how long after its last change a file must have been read
// for an equal stat to stand for equal bytes: far above any file system's
// clock tick (FAT's two seconds included).
const racyWindow = 3 * time.Second

// settled reports whether a file of stat st, read at readAt, cannot have
// been written again since without its stat changing: its last change came
// racyWindow or more before the read. A file written during or just
// before the read has to be read again, and its bytes compared.
func (st fileStat) settled(readAt time.Time) bool {
	return statTrusted && max(st.mtime, st.ctime) < readAt.Add(-racyWindow).UnixNano()
}
