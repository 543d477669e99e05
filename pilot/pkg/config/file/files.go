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
)

// scan is one listing of the watched folder.
type scan struct {
	files    []string // manifest paths relative to the root, slash-separated, sorted
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
// unreadable root is an error; an unreadable subfolder is a problem.
func listManifests(root string) (scan, error) {
	var s scan
	if _, err := os.ReadDir(root); err != nil {
		return s, err
	}
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
			if mode&fs.ModeSymlink != 0 {
				info, err := os.Stat(filepath.Join(dir, name))
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
				s.files = append(s.files, child)
			}
		}
	}
	walk(".")
	for i, f := range s.files {
		s.files[i] = strings.TrimPrefix(f, "./")
	}
	slices.Sort(s.files)
	return s, nil
}
