// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// document is one non-empty YAML document of a file.
type document struct {
	index int    // 0-based among the file's non-empty documents
	line  int    // 1-based line of its first line in the file
	first int    // 1-based line of its first line with content (not blank, not a comment)
	body  []byte // its text, without the separator
}

// splitDocuments cuts a YAML stream at its "---" separator lines (a line that
// is "---", or "---" followed by a space or tab and anything, as YAML allows)
// and drops documents that hold only blank lines, comments and the "..."
// end marker. A JSON file
// is one document.
func splitDocuments(data []byte) []document {
	var (
		docs  []document
		start = 1 // line of the current document's first line
		first = 0 // line of its first line with content, 0 until one is seen
		from  = 0 // offset of its first byte in data
		at    = 0 // offset of the line being looked at
	)
	flush := func(to int) {
		if first > 0 {
			// A document's lines are contiguous in data: its body is that
			// part of data, not a copy.
			docs = append(docs, document{index: len(docs), line: start, first: first, body: data[from:to:to]})
		}
		first = 0
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, l := range lines {
		next := at + len(l)
		text := bytes.TrimRight(l, "\r\n")
		if string(text) == "---" || bytes.HasPrefix(text, []byte("--- ")) || bytes.HasPrefix(text, []byte("---\t")) {
			flush(at)
			start, from, at = i+2, next, next
			continue
		}
		if t := bytes.TrimSpace(text); len(t) > 0 && string(t) != "..." && t[0] != '#' && first == 0 {
			first = i + 1
		}
		at = next
	}
	flush(at)
	return docs
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// toJSON converts a document to JSON as kubectl does (sigs.k8s.io/yaml, so
// YAML 1.1 scalars: an unquoted n is the boolean false). On a syntax error it
// returns the 1-based line in the file and the parser's message (yamlMessage).
func toJSON(d document) ([]byte, int, error) {
	j, err := yaml.YAMLToJSONStrict(d.body)
	if err == nil {
		return j, 0, nil
	}
	msg, line := yamlMessage(err.Error(), d.line)
	if line == 0 {
		line = d.first
	}
	return nil, line, fmt.Errorf("invalid YAML: %s", msg)
}

// yamlMessage rewrites a parser error about a document whose first line is
// file line start: on one line (the parser lists several errors one per
// line, under "unmarshal errors:"; they are joined with "; "), every line
// number counted from the top of the file. line is the first line number
// it names, 0 when it names none.
func yamlMessage(msg string, start int) (string, int) {
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	var parts []string
	for l := range strings.Lines(msg) {
		if l = strings.TrimSpace(l); l != "" && l != "unmarshal errors:" {
			parts = append(parts, l)
		}
	}
	line := 0
	msg = yamlLine.ReplaceAllStringFunc(strings.Join(parts, "; "), func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
		n += start - 1
		if line == 0 {
			line = n
		}
		return "line " + strconv.Itoa(n)
	})
	return msg, line
}
