// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
)

// blockDocument reads, by hand, the shape most manifests have: block
// mappings and sequences of one-line scalars, in printable ASCII, with
// comments. It returns what decodeJSON reads from toJSON's text
// (utiljson.Unmarshal's generic value), as nodeDocument does, and ok false
// for anything else, which then takes nodeDocument's way or the long one.
//
// It is written by hand because the libraries cannot be made fast enough:
// both YAML parsers in go.mod (yaml v2 and v3, ports of libyaml) read a
// document byte by byte through a general scanner, a parser and a node
// tree, about 30 µs for a ten-line Pod, and a folder of model servers holds
// a hundred thousand of them. What this reader accepts is a subset of YAML
// small enough to check whole: TestShortWaysAreYAMLToJSON,
// TestShortWaysRandom and FuzzShortWays compare it with sigs.k8s.io/yaml.
//
// The subset: every byte printable ASCII or a newline (no tab, no carriage
// return); no line starting with "%", "---" or "..."; the top a mapping at
// column 0; a key plain (letters, digits, "_", ".", "/", "-", not first) or
// quoted without escapes, followed by ":" and a space or the end of the
// line; a value on the key's line (a plain scalar with no ": " and not
// ending in ":", a quoted scalar without escapes, [] or {}), or on the lines
// below, more indented (a block mapping or sequence), or a block sequence at
// the key's own indentation; a sequence entry "- " followed by a scalar, a
// mapping or sequence entry (compact), or nothing and a block below.
// Comments are whole lines, or a "#" at the end of a line after a space or
// a quoted scalar.
func blockDocument(body []byte) (map[string]any, bool) {
	p := blockParser{src: body}
	if !p.split() || len(p.lines) == 0 || p.lines[0].indent != 0 {
		return nil, false
	}
	v, ok := p.mapping(0)
	if !ok || p.i != len(p.lines) {
		return nil, false
	}
	return v, true
}

// blockLine is a line with content: its indentation, and where its text
// (after the indentation, before trailing spaces) starts and ends in src.
type blockLine struct {
	indent     int
	start, end int
}

type blockParser struct {
	src   []byte
	lines []blockLine
	i     int // the line being read
}

// split cuts src into lines, leaving out blank and comment lines; false
// when src has a byte or a line outside the subset.
func (p *blockParser) split() bool {
	for _, c := range p.src {
		if (c < 0x20 || c > 0x7e) && c != '\n' {
			return false
		}
	}
	p.lines = make([]blockLine, 0, bytes.Count(p.src, []byte("\n"))+1)
	for at := 0; at < len(p.src); {
		end := bytes.IndexByte(p.src[at:], '\n')
		if end < 0 {
			end = len(p.src)
		} else {
			end += at
		}
		line := p.src[at:end]
		if len(line) > 0 && line[0] == '%' || bytes.HasPrefix(line, []byte("---")) || bytes.HasPrefix(line, []byte("...")) {
			return false
		}
		indent := 0
		for indent < len(line) && line[indent] == ' ' {
			indent++
		}
		text := bytes.TrimRight(line[indent:], " ")
		if len(text) > 0 && text[0] != '#' {
			p.lines = append(p.lines, blockLine{indent: indent, start: at + indent, end: at + indent + len(text)})
		}
		at = end + 1
	}
	return true
}

func (p *blockParser) text(l blockLine) []byte { return p.src[l.start:l.end] }

// node reads the block at line p.i, whose indentation is indent.
func (p *blockParser) node(indent int) (any, bool) {
	if sequenceEntry(p.text(p.lines[p.i])) {
		return p.sequence(indent)
	}
	return p.mapping(indent)
}

// mapping reads the entries at indentation indent from line p.i on.
func (p *blockParser) mapping(indent int) (map[string]any, bool) {
	m := map[string]any{}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent {
			break
		}
		if l.indent > indent {
			return nil, false
		}
		key, rest, ok := splitKey(p.text(l))
		if !ok {
			return nil, false
		}
		k := internedString(key)
		if _, dup := m[k]; dup {
			return nil, false // yaml v2 strict refuses it
		}
		v, ok := p.value(indent, rest)
		if !ok {
			return nil, false
		}
		m[k] = v
	}
	return m, true
}

// value reads the value of a key at indentation indent, rest being what
// follows the key's ":" on its line.
func (p *blockParser) value(indent int, rest []byte) (any, bool) {
	p.i++
	rest, ok := cutComment(rest)
	if !ok {
		return nil, false
	}
	if len(rest) > 0 {
		return p.lineScalar(rest)
	}
	if p.i == len(p.lines) {
		return nil, true
	}
	next := p.lines[p.i]
	switch {
	case next.indent > indent:
		return p.node(next.indent)
	case next.indent == indent && sequenceEntry(p.text(next)):
		return p.sequence(indent)
	}
	return nil, true
}

// sequence reads the entries at indentation indent from line p.i on.
func (p *blockParser) sequence(indent int) ([]any, bool) {
	items := []any{}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent || l.indent == indent && !sequenceEntry(p.text(l)) {
			break
		}
		if l.indent > indent {
			return nil, false
		}
		text := p.text(l)[1:]
		spaces := 0
		for spaces < len(text) && text[spaces] == ' ' {
			spaces++
		}
		content, ok := cutComment(text[spaces:])
		if !ok || len(content) > 0 && spaces == 0 {
			return nil, false
		}
		var item any
		switch {
		case len(content) == 0:
			p.i++
			if p.i < len(p.lines) && p.lines[p.i].indent > indent {
				if item, ok = p.node(p.lines[p.i].indent); !ok {
					return nil, false
				}
			}
		case sequenceEntry(content) || isKeyLine(content):
			// A compact mapping or sequence: its first entry is on this
			// line, at the column after "- ", the others below at that column.
			column := indent + 1 + spaces
			p.lines[p.i] = blockLine{indent: column, start: l.start + 1 + spaces, end: l.end}
			if item, ok = p.node(column); !ok {
				return nil, false
			}
		default:
			p.i++
			if item, ok = p.lineScalar(content); !ok {
				return nil, false
			}
		}
		items = append(items, item)
	}
	return items, true
}

// lineScalar reads the scalar s that ends a line. (The line after it may
// not be more indented, as a plain scalar's continuation would be: the
// mapping or sequence the scalar is in refuses such a line.)
func (p *blockParser) lineScalar(s []byte) (any, bool) {
	switch s[0] {
	case '"', '\'':
		body, rest, ok := quoted(s)
		if !ok || len(rest) > 0 {
			return nil, false
		}
		return internedString(body), true
	case '[', '{':
		switch string(s) {
		case "[]":
			return []any{}, true
		case "{}":
			return map[string]any{}, true
		}
		return nil, false
	case '-':
		if len(s) == 1 || s[1] == ' ' {
			return nil, false
		}
	case '?', ':', ',', ']', '}', '#', '&', '*', '!', '|', '>', '%', '@', '`':
		return nil, false
	}
	if bytes.Contains(s, []byte(": ")) || s[len(s)-1] == ':' {
		return nil, false
	}
	return resolvePlain(internedString(s))
}

// cutComment drops a comment ("#" after a space, or at the start) and the
// spaces before it. A quoted scalar is left whole (lineScalar reads it to
// its closing quote); false when its quote is not closed on the line.
func cutComment(s []byte) ([]byte, bool) {
	if len(s) > 0 && (s[0] == '"' || s[0] == '\'') {
		_, _, ok := quoted(s)
		return s, ok
	}
	if len(s) > 0 && s[0] == '#' {
		return nil, true
	}
	if i := bytes.Index(s, []byte(" #")); i >= 0 {
		s = s[:i]
	}
	return bytes.TrimRight(s, " "), true
}

// quoted splits s, which starts with a quote, into the quoted text and what
// follows the closing quote, less a comment and spaces (rest is empty
// unless something else follows, which the caller refuses). false for
// escapes (a backslash in double quotes, a doubled single quote) and a
// quote not closed on the line.
func quoted(s []byte) (body, rest []byte, ok bool) {
	q := s[0]
	end := bytes.IndexByte(s[1:], q)
	if end < 0 {
		return nil, nil, false
	}
	body = s[1 : 1+end]
	if q == '"' && bytes.IndexByte(body, '\\') >= 0 {
		return nil, nil, false
	}
	rest = s[2+end:]
	if len(rest) > 0 && rest[0] == q {
		return nil, nil, false // '' inside single quotes
	}
	// After a quoted scalar, a "#" starts a comment, space before it or not.
	if trimmed := bytes.TrimLeft(rest, " "); len(trimmed) == 0 || trimmed[0] == '#' {
		return body, nil, true
	}
	return body, rest, true
}

func sequenceEntry(text []byte) bool {
	return len(text) > 0 && text[0] == '-' && (len(text) == 1 || text[1] == ' ')
}

func isKeyLine(text []byte) bool {
	_, _, ok := splitKey(text)
	return ok
}

// splitKey splits "key: rest" (or "key:") into the key, which must be a
// string however it is written, and rest.
func splitKey(text []byte) (key, rest []byte, ok bool) {
	var end int
	switch text[0] {
	case '"', '\'':
		q := bytes.IndexByte(text[1:], text[0])
		if q < 0 {
			return nil, nil, false
		}
		key, end = text[1:1+q], 2+q
		if text[0] == '"' && bytes.IndexByte(key, '\\') >= 0 || end < len(text) && text[end] == text[0] {
			return nil, nil, false
		}
	default:
		for end < len(text) && plainKeyByte(text[end], end == 0) {
			end++
		}
		if end == 0 {
			return nil, nil, false
		}
		key = text[:end]
		if !plainStringKey(string(key)) {
			return nil, nil, false
		}
	}
	if end == len(text) || text[end] != ':' || end+1 < len(text) && text[end+1] != ' ' {
		return nil, nil, false
	}
	return key, bytes.TrimLeft(text[end+1:], " "), true
}

func plainKeyByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '/':
		return true
	case c == '-':
		return !first
	}
	return false
}

// internedString is string(b), without an allocation for the keys and
// values every manifest repeats.
func internedString(b []byte) string {
	if s, ok := commonStrings[string(b)]; ok {
		return s
	}
	return string(b)
}

var commonStrings = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"apiVersion", "kind", "metadata", "name", "namespace", "labels", "annotations", "spec", "status",
		"v1", "Pod", "Service", "app", "containers", "image", "ports", "containerPort", "protocol", "TCP",
		"port", "targetPort", "selector", "matchLabels", "phase", "Running", "podIP", "conditions", "type",
		"Ready", "True", "False", "number", "group", "parentRefs", "hostnames", "rules", "backendRefs",
		"targetPorts", "endpointPickerRef", "failureMode", "FailOpen", "FailClose", "InferencePool",
		"HTTPRoute", "inference.networking.k8s.io", "inference.networking.k8s.io/v1",
		"gateway.networking.k8s.io", "gateway.networking.k8s.io/v1",
	} {
		m[s] = s
	}
	return m
}()
