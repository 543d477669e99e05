// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// The file indexes in the packages' doc.go files, checked against the tree.
//
// Every directory of this module that holds non-test .go files is a package,
// and its doc.go carries a package comment with a "# Files" section: a list
// with one item per non-test file of the package, "name.go: what it holds"
// (a package whose only non-test file is doc.go needs no section).
// TestDocIndex walks the module from its root (the folder of go.mod) and
// reports every package without doc.go and every file that its index leaves
// out or names without the file existing. doc.go itself is the index and is
// not listed. Skipped: testdata folders, folders whose name starts with "."
// or "_", and nested modules (a folder with its own go.mod, bench/istio).
//
// The test reads directory entries and parses only each doc.go's package
// clause and comment, so it runs in milliseconds and needs no network.
package infermesh_test

import (
	"errors"
	"fmt"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// filesHeading is the heading of the index section in a package comment.
const filesHeading = "Files"

func TestDocIndex(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := checkDocIndexes(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) == 0 {
		return
	}
	t.Errorf("file indexes out of date (%d problems); each package's doc.go needs a %q section listing every non-test file as %q:\n%s",
		len(problems), "# "+filesHeading, "  - name.go: what it holds", strings.Join(problems, "\n"))
}

// moduleRoot is the nearest folder at or above the working directory that
// holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// checkDocIndexes walks the module rooted at root and returns one line per
// problem, "pkg/dir: ...", sorted by package.
func checkDocIndexes(root string) ([]string, error) {
	var problems []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if path != root {
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		p, err := checkPackage(path, rel)
		problems = append(problems, p...)
		return err
	})
	return problems, err
}

// checkPackage checks one folder; a folder without non-test .go files is not
// a package here and passes.
func checkPackage(dir, rel string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			files = append(files, n)
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	if !slices.Contains(files, "doc.go") {
		return []string{fmt.Sprintf("%s: no doc.go (package files: %s)", rel, strings.Join(files, ", "))}, nil
	}
	listed, problems, err := readIndex(filepath.Join(dir, "doc.go"), len(files) > 1)
	if err != nil {
		return nil, err
	}
	for i := range problems {
		problems[i] = rel + ": doc.go: " + problems[i]
	}
	for _, f := range files {
		if f != "doc.go" && !slices.Contains(listed, f) {
			problems = append(problems, fmt.Sprintf("%s: doc.go does not list %s", rel, f))
		}
	}
	for _, f := range listed {
		if !slices.Contains(files, f) {
			problems = append(problems, fmt.Sprintf("%s: doc.go lists %s, which is not a non-test file of the package", rel, f))
		}
	}
	return problems, nil
}

// itemName is how an index item starts: a file name and a colon.
var itemName = regexp.MustCompile(`^([A-Za-z0-9_.+-]+\.go):\s*(\S.*)?$`)

// readIndex parses doc.go's package comment and returns the file names its
// "# Files" section lists, and what is wrong with the section's form. The
// section may be left out when doc.go is the package's only non-test file
// (needSection false).
func readIndex(path string, needSection bool) (listed, problems []string, err error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	if f.Doc == nil {
		return nil, []string{"no package comment"}, nil
	}
	var p comment.Parser
	doc := p.Parse(f.Doc.Text())
	sections := 0
	in := false
	for _, b := range doc.Content {
		if h, ok := b.(*comment.Heading); ok {
			in = plainText(h.Text) == filesHeading
			if in {
				sections++
			}
			continue
		}
		l, ok := b.(*comment.List)
		if !in || !ok {
			continue
		}
		for _, item := range l.Items {
			first := ""
			if len(item.Content) > 0 {
				if para, ok := item.Content[0].(*comment.Paragraph); ok {
					first = strings.Join(strings.Fields(plainText(para.Text)), " ")
				}
			}
			m := itemName.FindStringSubmatch(first)
			switch {
			case m == nil:
				problems = append(problems, fmt.Sprintf("item %q does not start with one file name and a colon", first))
			case m[2] == "":
				problems = append(problems, fmt.Sprintf("item for %s says nothing about it", m[1]))
			case slices.Contains(listed, m[1]):
				problems = append(problems, fmt.Sprintf("%s is listed twice", m[1]))
			default:
				listed = append(listed, m[1])
			}
		}
	}
	switch {
	case sections == 0 && needSection:
		problems = append(problems, fmt.Sprintf("package comment has no %q section", "# "+filesHeading))
	case sections > 1:
		problems = append(problems, fmt.Sprintf("package comment has %d %q sections", sections, "# "+filesHeading))
	}
	return listed, problems, nil
}

// plainText is the text of a doc comment span without its markup.
func plainText(text []comment.Text) string {
	var b strings.Builder
	for _, t := range text {
		switch t := t.(type) {
		case comment.Plain:
			b.WriteString(string(t))
		case comment.Italic:
			b.WriteString(string(t))
		case *comment.Link:
			b.WriteString(plainText(t.Text))
		case *comment.DocLink:
			b.WriteString(plainText(t.Text))
		}
	}
	return b.String()
}

// TestCheckDocIndexes runs the checker on a made-up module with one of each
// problem, and with the folders it must skip.
func TestCheckDocIndexes(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	// good: every file listed; a test file and a paragraph in the section
	// need no entry.
	write("good/doc.go", `// Package good is fine.
//
// # Files
//
// The builders:
//
//   - a.go: the a builder, over two
//     lines.
//   - b.go: the b builder.
package good
`)
	write("good/a.go", "package good\n")
	write("good/b.go", "package good\n")
	write("good/a_test.go", "package good\n")
	// nodoc: no doc.go at all.
	write("nodoc/x.go", "package nodoc\n")
	// drift: c.go unlisted, gone.go listed but absent, a.go listed twice,
	// an item naming no file, an item without a description, and a list
	// before the section that does not count.
	write("drift/doc.go", `// Package drift has drifted.
//
//   - c.go: outside the section, so not an entry.
//
// # Files
//
//   - a.go: the a file.
//   - gone.go: a file that was removed.
//   - a.go: again.
//   - the b file
//   - b.go:
//
// # Other
//
//   - c.go: after the section, so not an entry either.
package drift
`)
	write("drift/a.go", "package drift\n")
	write("drift/b.go", "package drift\n")
	write("drift/c.go", "package drift\n")
	// nosection: a package comment without "# Files"; nocomment: none.
	write("nosection/doc.go", "// Package nosection has no index.\npackage nosection\n")
	write("nosection/y.go", "package nosection\n")
	write("nocomment/doc.go", "package nocomment\n")
	// onlydoc: doc.go is the only non-test file, so there is nothing to
	// list and no section is needed.
	write("onlydoc/doc.go", "// Package onlydoc holds tests.\npackage onlydoc\n")
	write("onlydoc/o_test.go", "package onlydoc\n")
	// Skipped: tests only, testdata, hidden folders, nested modules.
	write("onlytests/z_test.go", "package onlytests\n")
	write("good/testdata/t.go", "package t\n")
	write(".hidden/h.go", "package h\n")
	write("nested/go.mod", "module example.com/nested\n")
	write("nested/n.go", "package nested\n")

	got, err := checkDocIndexes(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`drift: doc.go: a.go is listed twice`,
		`drift: doc.go: item "the b file" does not start with one file name and a colon`,
		`drift: doc.go: item for b.go says nothing about it`,
		`drift: doc.go does not list b.go`,
		`drift: doc.go does not list c.go`,
		`drift: doc.go lists gone.go, which is not a non-test file of the package`,
		`nocomment: doc.go: no package comment`,
		`nodoc: no doc.go (package files: x.go)`,
		`nosection: doc.go: package comment has no "# Files" section`,
		`nosection: doc.go does not list y.go`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
