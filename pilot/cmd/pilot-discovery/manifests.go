// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
)

// stdinName is what -f - reads from, and how its problems name it.
const stdinName = "-"

// manifestSet is what the offline commands read (-f PATH, repeatable, as
// kubectl takes it): folders (with their subfolders), files, and "-" for
// stdin. The file source reads one folder, so several paths, a file or
// stdin are copied into a temporary folder first, each under its own
// numbered subfolder; display turns a path in that folder back into the
// path the user gave, for problems.
type manifestSet struct {
	dir string
	// origins maps the staged subfolder ("0", "1", ...) to the path given
	// and whether it was a folder.
	origins map[string]origin
	cleanup func()
}

type origin struct {
	path  string
	isDir bool
}

// stageManifests prepares paths for the file source. One folder is read
// in place; anything else is copied. The error names the path that cannot
// be read.
func stageManifests(paths []string, stdin io.Reader) (*manifestSet, error) {
	if len(paths) == 0 {
		return nil, errors.New("-f is required: a manifest file, a folder of manifests, or - for stdin (repeatable)")
	}
	if len(paths) == 1 && paths[0] != stdinName {
		if st, err := os.Stat(paths[0]); err == nil && st.IsDir() {
			return &manifestSet{dir: paths[0], origins: map[string]origin{}, cleanup: func() {}}, nil
		}
	}
	tmp, err := os.MkdirTemp("", "pilot-discovery-manifests-")
	if err != nil {
		return nil, err
	}
	m := &manifestSet{dir: tmp, origins: map[string]origin{}, cleanup: func() { _ = os.RemoveAll(tmp) }}
	stdinRead := false
	for i, p := range paths {
		sub := strconv.Itoa(i)
		dst := filepath.Join(tmp, sub)
		if err := os.Mkdir(dst, 0o700); err != nil {
			m.cleanup()
			return nil, err
		}
		if p == stdinName {
			if stdinRead {
				m.cleanup()
				return nil, errors.New("-f -: stdin can be read once")
			}
			stdinRead = true
			m.origins[sub] = origin{path: "<stdin>"}
			if err := writeFrom(filepath.Join(dst, "stdin.yaml"), stdin); err != nil {
				m.cleanup()
				return nil, fmt.Errorf("-f -: %w", err)
			}
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			m.cleanup()
			return nil, fmt.Errorf("-f %s: %w", p, err)
		}
		m.origins[sub] = origin{path: p, isDir: st.IsDir()}
		if st.IsDir() {
			err = copyTree(p, dst)
		} else {
			err = copyFile(p, filepath.Join(dst, manifestName(filepath.Base(p))))
		}
		if err != nil {
			m.cleanup()
			return nil, fmt.Errorf("-f %s: %w", p, err)
		}
	}
	return m, nil
}

// manifestName keeps a file's name when the file source reads it (.yaml,
// .yml, .json) and adds .yaml otherwise: a file named on the command line
// is read whatever its name, as kubectl does.
func manifestName(base string) string {
	switch strings.ToLower(path.Ext(base)) {
	case ".yaml", ".yml", ".json":
		return base
	}
	return base + ".yaml"
}

// display is the path the user gave for rel, a file path relative to
// m.dir with forward slashes (file.Problem.File).
func (m *manifestSet) display(rel string) string {
	sub, rest, _ := strings.Cut(rel, "/")
	o, ok := m.origins[sub]
	switch {
	case !ok && len(m.origins) == 0:
		return filepath.ToSlash(filepath.Join(m.dir, rel))
	case !ok:
		return rel
	case o.isDir:
		return filepath.ToSlash(filepath.Join(o.path, rest))
	}
	return filepath.ToSlash(o.path)
}

// problems are the source's problems with each file named as the user
// gave it, also the file a duplicate's message says holds the served
// declaration.
func (m *manifestSet) problems(src *file.Source) []file.Problem {
	ps := src.Problems()
	for i := range ps {
		ps[i].File = m.display(ps[i].File)
		if in := ps[i].DefinedIn; in != "" {
			ps[i].DefinedIn = m.display(in)
			ps[i].Message = strings.Replace(ps[i].Message, "defined in "+in+" ", "defined in "+ps[i].DefinedIn+" ", 1)
		}
	}
	return ps
}

func writeFrom(dst string, r io.Reader) error {
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	return writeFrom(dst, in)
}

// copyTree copies the regular files under src (symlinks to files followed,
// names starting with "." skipped, as the file source does) to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel != "." && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			return nil // dangling link or a link to a folder: the file source skips them too
		}
		return copyFile(p, target)
	})
}
