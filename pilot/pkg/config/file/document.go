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
		from  = 0 // offset of its first byte in data
		at    = 0 // offset of the line being looked at
		empty = true
	)
	flush := func(to int) {
		if !empty {
			// A document's lines are contiguous in data: its body is that
			// part of data, not a copy.
			docs = append(docs, document{index: len(docs), line: start, body: data[from:to:to]})
		}
		empty = true
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
		if t := bytes.TrimSpace(text); len(t) > 0 && string(t) != "..." && t[0] != '#' {
			empty = false
		}
		at = next
	}
	flush(at)
	return docs
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// toJSON converts a document to JSON as kubectl does (sigs.k8s.io/yaml, so
// YAML 1.1 scalars: an unquoted n is the boolean false). On a syntax error it
// returns the 1-based line in the file and the parser's message, whose line
// number it rewrites to count from the top of the file.
func toJSON(d document) ([]byte, int, error) {
	j, err := yaml.YAMLToJSONStrict(d.body)
	if err == nil {
		return j, 0, nil
	}
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := d.line
	if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
		n, _ := strconv.Atoi(msg[m[2]:m[3]])
		line = d.line + n - 1
		msg = msg[:m[2]] + strconv.Itoa(line) + msg[m[3]:]
	}
	return nil, line, fmt.Errorf("invalid YAML: %s", msg)
}
