// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package infermesh_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// whereThingsLiveHeading is the section of architecture/README.md that maps
// a newcomer's questions to a file and a function.
const whereThingsLiveHeading = "## Where things live"

// whereRow is one row of that table: the file and the function it names.
type whereRow struct {
	line     int
	file     string
	function string
}

// TestWhereThingsLive checks the "Where things live" table of
// architecture/README.md against the tree: every file it names exists and
// declares the function it names (a function or a method of that name), so
// a rename or a move shows up here rather than misleading a reader.
func TestWhereThingsLive(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(root, "architecture", "README.md")
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseWhereThingsLive(string(data))
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	// The questions the table must answer at least (the walk plus
	// the ones a newcomer asks next); fewer rows means the table was cut.
	if len(rows) < 10 {
		t.Fatalf("%s: %q has %d rows, want at least 10", doc, whereThingsLiveHeading, len(rows))
	}
	for _, r := range rows {
		if problem := checkWhereRow(root, r); problem != "" {
			t.Errorf("architecture/README.md:%d: %s", r.line, problem)
		}
	}
}

// parseWhereThingsLive returns the rows of the table under
// whereThingsLiveHeading: a header row whose second and third cells are
// "file" and "function", a separator, then one row per question with the
// file and the function each in backquotes.
func parseWhereThingsLive(doc string) ([]whereRow, error) {
	lines := strings.Split(doc, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == whereThingsLiveHeading {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no %q section", whereThingsLiveHeading)
	}
	var rows []whereRow
	header := false
	for i := start + 1; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "#") {
			break
		}
		if !strings.HasPrefix(l, "|") {
			if header {
				break // the first line after the table ends it
			}
			continue
		}
		cells := tableCells(l)
		if !header {
			if len(cells) < 3 || cells[1] != "file" || cells[2] != "function" {
				return nil, fmt.Errorf("line %d: table header %q, want columns question | file | function", i+1, l)
			}
			header = true
			continue
		}
		if strings.Trim(l, "|-: ") == "" {
			continue // the separator row
		}
		if len(cells) < 3 {
			return nil, fmt.Errorf("line %d: %d cells, want at least 3", i+1, len(cells))
		}
		file, ok1 := backquoted(cells[1])
		fn, ok2 := backquoted(cells[2])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("line %d: file %q and function %q must each be one `backquoted` name", i+1, cells[1], cells[2])
		}
		rows = append(rows, whereRow{line: i + 1, file: file, function: fn})
	}
	if !header {
		return nil, fmt.Errorf("no table under %q", whereThingsLiveHeading)
	}
	return rows, nil
}

// tableCells splits a Markdown table row into its trimmed cells.
func tableCells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	row = strings.TrimSuffix(row, "|")
	parts := strings.Split(row, "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// backquoted returns s without its backquotes when s is exactly one
// backquoted word.
func backquoted(s string) (string, bool) {
	if len(s) < 3 || s[0] != '`' || s[len(s)-1] != '`' || strings.Count(s, "`") != 2 {
		return "", false
	}
	return s[1 : len(s)-1], true
}

// checkWhereRow returns what is wrong with r, or "".
func checkWhereRow(root string, r whereRow) string {
	if filepath.IsAbs(r.file) || strings.Contains(r.file, "..") {
		return fmt.Sprintf("file %q must be a path inside the module", r.file)
	}
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(r.file)))
	if err != nil {
		return fmt.Sprintf("file %s: %v", r.file, err)
	}
	if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(r.function) {
		return fmt.Sprintf("function %q is not a Go identifier", r.function)
	}
	// "func Name(" or "func Name[" (generic), or a method "func (recv) Name(".
	decl := regexp.MustCompile(`(?m)^func (\([^)]*\) )?` + regexp.QuoteMeta(r.function) + `[(\[]`)
	if !decl.Match(src) {
		return fmt.Sprintf("%s declares no function or method %s", r.file, r.function)
	}
	return ""
}
