// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitDocuments(t *testing.T) {
	in := "---\n# only a comment\n---\na: 1\n--- # trailing\nb: 2\n\n---\n\n...\n"
	got := splitDocuments([]byte(in))
	type doc struct {
		Index, Line int
		Body        string
	}
	var gotDocs []doc
	for _, d := range got {
		gotDocs = append(gotDocs, doc{d.index, d.line, string(d.body)})
	}
	want := []doc{{0, 4, "a: 1\n"}, {1, 6, "b: 2\n\n"}}
	if diff := cmp.Diff(want, gotDocs); diff != "" {
		t.Errorf("documents (-want +got):\n%s", diff)
	}
}

func TestToJSONLine(t *testing.T) {
	_, line, err := toJSON(document{line: 10, body: []byte("a: 1\nb: [\n")})
	if err == nil || line != 11 {
		t.Fatalf("toJSON = line %d, %v; want a syntax error on line 11", line, err)
	}
	if want := "invalid YAML: line 11: did not find expected node content"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}
