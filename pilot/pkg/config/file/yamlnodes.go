// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// nodeDocument reads a document the shorter way: go.yaml.in/yaml/v3 parses
// it into its node tree, and one walk of the tree builds what decodeJSON
// reads from toJSON's text (utiljson.Unmarshal's generic value, integers as
// int64). The long way (sigs.k8s.io/yaml) parses with yaml v2 into a generic
// value, copies it with string keys, encodes it as JSON, and decodeJSON
// decodes the JSON again.
//
// ok is false, and the caller takes the long way, for anything beyond plain
// data: a syntax error (so every problem text is the long way's), tags,
// anchors and aliases, merge keys, keys that are not strings, duplicate keys,
// floats, integers beyond int64, directives and document end markers, a top
// level that is not a mapping. What the short way accepts it reads as yaml
// v2 does (YAML 1.1 scalars: an unquoted yes or off is a boolean, 0x1F and
// 017 are integers, 1_000 is 1000); TestShortWaysAreYAMLToJSON and
// FuzzShortWays compare it with the long way.
func nodeDocument(body []byte) (map[string]any, bool) {
	if !plainDocument(body) {
		return nil, false
	}
	var doc yaml3.Node
	if err := unmarshalNode(body, &doc); err != nil {
		return nil, false
	}
	if doc.Kind != yaml3.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml3.MappingNode {
		return nil, false
	}
	v, ok := nodeValue(doc.Content[0])
	if !ok {
		return nil, false
	}
	return v.(map[string]any), true
}

// unmarshalNode is yaml3.Unmarshal into a node, with a panic (the parser's
// own failures are errors, but a parser that panics on some input must not
// take the folder down) turned into an error.
func unmarshalNode(body []byte, n *yaml3.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errNodePanic
		}
	}()
	return yaml3.Unmarshal(body, n)
}

type nodeError string

func (e nodeError) Error() string { return string(e) }

const errNodePanic = nodeError("yaml v3 parser panicked")

// plainDocument rules out, before parsing, what yaml v3's node tree does not
// tell apart from plain data or what the two parsers take differently: any
// "!" (the non-specific tag "!" leaves no trace in a node: `! 1` is the
// string "1" for yaml v2), a "%" directive (v3 takes %YAML 1.2, v2 refuses
// it) and a "..." document end (after which v2 and v3 look ahead
// differently far).
func plainDocument(body []byte) bool {
	if bytes.IndexByte(body, '!') >= 0 {
		return false
	}
	for line := body; len(line) > 0; {
		if line[0] == '%' || bytes.HasPrefix(line, []byte("...")) {
			return false
		}
		i := bytes.IndexByte(line, '\n')
		if i < 0 {
			break
		}
		line = line[i+1:]
	}
	return true
}

// nodeValue returns n's generic value; false when n is beyond plain data
// (see nodeDocument).
func nodeValue(n *yaml3.Node) (any, bool) {
	if n.Anchor != "" || n.Style&yaml3.TaggedStyle != 0 {
		return nil, false
	}
	switch n.Kind {
	case yaml3.MappingNode:
		return nodeMapping(n)
	case yaml3.SequenceNode:
		items := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, ok := nodeValue(c)
			if !ok {
				return nil, false
			}
			items[i] = v
		}
		return items, true
	case yaml3.ScalarNode:
		if n.Style != 0 {
			// Quoted, literal or folded: a string, whatever it looks like.
			return n.Value, true
		}
		return resolvePlain(n.Value)
	}
	return nil, false // an alias
}

func nodeMapping(n *yaml3.Node) (any, bool) {
	m := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml3.ScalarNode || k.Anchor != "" || k.Style&yaml3.TaggedStyle != 0 {
			return nil, false
		}
		if k.Style == 0 && !plainStringKey(k.Value) {
			return nil, false
		}
		if _, dup := m[k.Value]; dup {
			return nil, false // yaml v2 strict refuses it
		}
		v, ok := nodeValue(n.Content[i+1])
		if !ok {
			return nil, false
		}
		m[k.Value] = v
	}
	return m, true
}

// plainStringKey: an unquoted key is a string only if it resolves to one
// (`on:` is the key true, `1:` the key 1) and is not "<<" (a merge).
func plainStringKey(k string) bool {
	v, ok := resolvePlain(k)
	return ok && v == any(k) && k != "<<"
}

// resolvePlain is what yaml v2 (go.yaml.in/yaml/v2's resolve, unexported,
// so written here again) makes of an untagged plain scalar, as
// utiljson.Unmarshal reads it back from sigs.k8s.io/yaml's JSON: nil, a
// bool, an int64 or the string itself. ok is false for what the short way
// leaves to the long one: floats (.inf, 1e3, 1.5, 08, which the JSON round
// trip may turn into integers), integers beyond int64, and the binary forms
// yaml v2 tries last. A timestamp (2001-12-14) is a string for a generic
// value in yaml v2, which is what this returns for it: no timestamp parses
// as a number.
func resolvePlain(s string) (any, bool) {
	if s == "" {
		return nil, true
	}
	hint := resolveHint(s[0])
	if hint == 0 {
		return s, true
	}
	if v, ok := yaml11Constants[s]; ok {
		if f, isFloat := v.(float64); isFloat && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return nil, false
		}
		return v, true
	}
	switch hint {
	case '.':
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return nil, false
		}
	case 'D', 'S':
		plain := strings.ReplaceAll(s, "_", "")
		if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return i, true
		}
		if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return nil, false
		}
		if yaml11Float.MatchString(plain) {
			if _, err := strconv.ParseFloat(plain, 64); err == nil {
				return nil, false
			}
		}
		// What yaml v2 tries last reads as a number only what strconv's
		// base prefixes did not (0b-1 is -1): leave those to it.
		if rest, ok := strings.CutPrefix(plain, "0b"); ok {
			if _, err := strconv.ParseInt(rest, 2, 64); err == nil {
				return nil, false
			}
			if _, err := strconv.ParseUint(rest, 2, 64); err == nil {
				return nil, false
			}
		} else if rest, ok := strings.CutPrefix(plain, "-0b"); ok {
			if _, err := strconv.ParseInt("-"+rest, 2, 64); err == nil {
				return nil, false
			}
		}
	}
	return s, true
}

// resolveHint is yaml v2's resolveTable: the first byte says what a plain
// scalar may be (0: only a string).
func resolveHint(c byte) byte {
	switch {
	case c == '+' || c == '-':
		return 'S'
	case c >= '0' && c <= '9':
		return 'D'
	case strings.IndexByte("yYnNtTfFoO~", c) >= 0:
		return 'M'
	case c == '.':
		return '.'
	}
	return 0
}

// yaml11Constants is yaml v2's resolveMap less "<<" (a merge key only as a
// key, which mapping refuses; elsewhere the string "<<").
var yaml11Constants = func() map[string]any {
	m := map[string]any{}
	for _, c := range []struct {
		v any
		l []string
	}{
		{true, []string{"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}},
		{false, []string{"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}},
		{nil, []string{"", "~", "null", "Null", "NULL"}},
		{math.NaN(), []string{".nan", ".NaN", ".NAN"}},
		{math.Inf(+1), []string{".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"}},
		{math.Inf(-1), []string{"-.inf", "-.Inf", "-.INF"}},
	} {
		for _, s := range c.l {
			m[s] = c.v
		}
	}
	return m
}()

// yaml11Float is yaml v2's yamlStyleFloat.
var yaml11Float = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// shortWay reads a document without the long way's JSON round trip:
// blockDocument for the common shape, else nodeDocument; false when the
// document needs the long way (toJSON, decodeJSON).
func shortWay(body []byte) (map[string]any, bool) {
	if top, ok := blockDocument(body); ok {
		return top, true
	}
	return nodeDocument(body)
}
