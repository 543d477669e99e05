// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitDocuments(t *testing.T) {
	in := "---\n# only a comment\n---\na: 1\n--- # trailing\n# about b\n\nb: 2\n\n---\n\n...\n"
	got := splitDocuments([]byte(in))
	type doc struct {
		Index, Line, First int
		Body               string
	}
	var gotDocs []doc
	for _, d := range got {
		gotDocs = append(gotDocs, doc{d.index, d.line, d.first, string(d.body)})
	}
	// First is the line a problem points at: b's, not its comment's.
	want := []doc{{0, 4, 4, "a: 1\n"}, {1, 6, 8, "# about b\n\nb: 2\n\n"}}
	if diff := cmp.Diff(want, gotDocs); diff != "" {
		t.Errorf("documents (-want +got):\n%s", diff)
	}
}

func TestToJSONLine(t *testing.T) {
	_, line, err := toJSON(document{line: 10, first: 10, body: []byte("a: 1\nb: [\n")})
	if err == nil || line != 11 {
		t.Fatalf("toJSON = line %d, %v; want a syntax error on line 11", line, err)
	}
	if want := "invalid YAML: line 11: did not find expected node content"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// TestToJSONMessageOnOneLine: the parser lists several errors one per line
// under "unmarshal errors:"; the message is one line, every line number
// counted from the top of the file.
func TestToJSONMessageOnOneLine(t *testing.T) {
	_, line, err := toJSON(document{line: 20, first: 21, body: []byte("# c\na: 1\na: 2\nb: 1\nb: 2\n")})
	if err == nil {
		t.Fatal("no error for duplicate keys")
	}
	want := `invalid YAML: line 22: key "a" already set in map; line 24: key "b" already set in map`
	if err.Error() != want || line != 22 {
		t.Errorf("toJSON = line %d, %q; want line 22, %q", line, err, want)
	}
}
