// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// shortWays are the readers that spare the long way's JSON round trip.
var shortWays = []struct {
	name string
	read func([]byte) (map[string]any, bool)
}{{"blockDocument", blockDocument}, {"nodeDocument", nodeDocument}}

// sameAsLongWay reports, for each short way that takes text, any difference
// from the long way: sigs.k8s.io/yaml's YAMLToJSONStrict (toJSON), then
// utiljson.Unmarshal (decodeJSON); and any difference between the JSON
// genericJSON writes for the value and the long way's. It returns which
// short ways took the document.
func sameAsLongWay(t testing.TB, text string) (taken [2]bool) {
	t.Helper()
	for i, way := range shortWays {
		top, ok := way.read([]byte(text))
		if !ok {
			continue
		}
		taken[i] = true
		j, err := yaml.YAMLToJSONStrict([]byte(text))
		if err != nil {
			t.Errorf("%s %q: the short way accepts what the long way refuses (%v): %#v", way.name, text, err, top)
			continue
		}
		var u any
		if err := utiljson.Unmarshal(j, &u); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if !reflect.DeepEqual(any(top), u) {
			t.Errorf("%s %q: generic values differ:\nshort way: %#v\nlong way:  %#v", way.name, text, top, u)
		}
		if raw, err := genericJSON(top); err != nil || !bytes.Equal(raw, j) {
			t.Errorf("%s %q: JSON differs (%v):\ngenericJSON: %s\nlong way:    %s", way.name, text, err, raw, j)
		}
	}
	return taken
}

// shortWayCases: documents the short way must take (true) or leave to
// the long way (false): YAML 1.1's scalars, quoting, escapes, flow and
// block styles, comments; and tags, anchors, merge keys, non-string and
// duplicate keys, floats, syntax errors.
var shortWayCases = []struct {
	text        string
	block, node bool // taken by blockDocument, nodeDocument
}{
	{benchPod, true, true},
	{benchPool, true, true},
	{benchRoute, true, true},
	{"a: yes\nb: no\nc: on\nd: off\ne: y\nf: n\ng: Y\nh: NO\ni: True\nj: FALSE\n", true, true},
	{"a: ~\nb: null\nc: Null\nd:\ne: NULL\nf: nul\n", true, true},
	{"a: 0\nb: -0\nc: +5\nd: 007\ne: 0o17\nf: 0x1F\ng: 0b101\nh: 1_000\ni: 9223372036854775807\nj: -9223372036854775808\n", true, true},
	{"a: 2001-12-14\nb: 2001-12-14T21:59:43.10Z\nc: 10.100.0.1\nd: 1:20\ne: 0x\nf: _1\ng: 0b2\n", true, true},
	{"a: 'yes'\nb: \"on\"\nc: '1'\nd: \"0x1F\"\ne: '~'\nf: ''\n", true, true},
	{"a: \"<b>&amp;</b>\"\nb: é日本\nc: \"tab\\there\\nnew\\u2028\"\nd: 'it''s'\ne: \"\\x01\"\n", false, true},
	{"a: x#y\nb: x # comment\n# whole line\nc: [1, yes, 'q', {d: e}]\nd: {}\ne: []\n", false, true},
	{"a: |\n  line one\n  line two\nb: >\n  folded\n  text\nc: |-\n  kept\n", false, true},
	{"a:\n- - 1\n  - 2\n- b: c\n  d: [x]\n", false, true},
	{"a: plain\n  continued\nb: \"multi\n  line\"\n", false, true},
	{"'on': 1\n\"1\": 2\n'': 3\n", true, true},
	{"ports:\n- containerPort: 8000\n  protocol: TCP\n", true, true},
	{"a: &x 1\nb: *x\n", false, false},
	{"base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n", false, false},
	{"a: !!str 1\n", false, false},
	{"a: ! 1\n", false, false},
	{"a: !!binary aGk=\n", false, false},
	{"on: 1\n", false, false},
	{"1: a\n", false, false},
	{"~: a\n", false, false},
	{"a: 1\na: 2\n", false, false},
	{"a: 1\n'a': 2\n", false, false},
	{"? [x]\n: 1\n", false, false},
	{"a: 1.5\n", false, false},
	{"a: 08\n", false, false}, // not octal, so yaml v2's float 8
	{"a: 1e3\n", false, false},
	{"a: .inf\n", false, false},
	{"a: .5\n", false, false},
	{"a: 9223372036854775808\n", false, false},
	{"a: 18446744073709551616\n", false, false},
	{"%YAML 1.1\n---\na: 1\n", false, false},
	{"a: 1\n...\n", false, false},
	{"a: [unterminated\n", false, false},
	{"a: b: c\n", false, false},
	{"- a\n- b\n", false, false},
	{"just a string\n", false, false},
	{"", false, false},
	// blockDocument's subset: comments, quotes, indentation.
	{"# head\na: 1 # one\nb: 'x # y' # z\nc: \"q\"   \nd: # nothing\ne:\n  # inside\n  f: g\n", true, true},
	{"a:\n- x\n-   p: 1\n    z: 2\n-\n  w: 3\n- - n\n  - m\nb:\n    - deep\n", true, true},
	{"a:\n- y: 1\n", false, false}, // the key true
	{"a:\n  b:\n    c: d\n  e: f\ng: h\n", true, true},
	{"k.io/n-m_o: 2\n'a b': 3\n", true, true},
	{"-x: 1\n", false, true},
	{"a: -5\nb: -x\nc: a:b\nd: <<\ne: 'it\"s'\nf: \"it's\"\ng: x, [y] {z}\n", true, true},
	{"a:\tb\n", false, true},
	{"a: 1\r\nb: 2\r\n", false, true},
	{"a:b\n", false, false},
	{"a: x:\n", false, false},
	{"a:\n    b: 1\n  c: 2\n", false, false},
	{"a:\n  - x\n  b: y\n", false, false},
	{"a: 1\n- b\n", false, false},
	{"  a: 1\n", false, true},
	{"a: 'x'y\n", false, false},
	{"a: \"x\"#y\nb: 'z'#\n", true, true}, // after a quote, # starts a comment
	{"a: 'it''s'\n", false, true},
	{"a: \"t\\tb\"\n", false, true},
	{"a: [x]\n", false, true},
	{"a: @x\n", false, false},
	{"a: `x\n", false, false},
	{"a: - x\n", false, false},
}

// TestShortWaysAreYAMLToJSON: what a short way takes, it reads as the long
// way does, value for value (and genericJSON writes the long way's JSON
// byte for byte); each takes the documents it is meant for
// (hack/gen-pools.sh's among them) and leaves the rest.
func TestShortWaysAreYAMLToJSON(t *testing.T) {
	for _, c := range shortWayCases {
		taken := sameAsLongWay(t, c.text)
		if want := [2]bool{c.block, c.node}; taken != want {
			t.Errorf("%q: taken by blockDocument, nodeDocument: %v, want %v", c.text, taken, want)
		}
	}
}

// TestShortWaysRandom compares the short ways with the long way over
// generated documents mixing YAML 1.1's scalars, quoting styles, flow and
// block collections, indentations, comments, anchors, tags and odd keys.
// The test fails if a short way takes too few, so that it cannot pass by
// refusing everything.
func TestShortWaysRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 5))
	n := 6000
	var taken [2]int
	for k := range n {
		gen := genDocument
		if k%2 == 0 {
			gen = genManifest
		}
		for i, ok := range sameAsLongWay(t, gen(r)) {
			if ok {
				taken[i]++
			}
		}
	}
	for i, way := range shortWays {
		t.Logf("%s took %d of %d generated documents", way.name, taken[i], n)
		if taken[i] < n/4 {
			t.Errorf("%s took %d of %d generated documents; want at least a quarter", way.name, taken[i], n)
		}
	}
}

// FuzzShortWays: go test -fuzz FuzzShortWays ./pilot/pkg/config/file/
func FuzzShortWays(f *testing.F) {
	for _, c := range shortWayCases {
		f.Add(c.text)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		f.Add(genDocument(r))
		f.Add(genManifest(r))
	}
	f.Fuzz(func(t *testing.T, text string) { sameAsLongWay(t, text) })
}

// yaml11Scalars are scalars whose reading YAML 1.1 and JSON make tricky.
var yaml11Scalars = []string{
	"yes", "no", "on", "off", "y", "n", "Y", "N", "Yes", "NO", "On", "OFF", "true", "False", "TRUE",
	"null", "Null", "NULL", "~", "", "nul",
	"0", "-0", "+0", "+5", "-5", "007", "08", "0o17", "0O17", "0x1F", "0X1f", "0b101", "-0b101", "0b2",
	"1_000", "1__0", "_1", "1_", "0x_1F", "0b", "0x", "+0x10", "-0x10", "0777",
	"1e3", "1E+3", "1e", "1.5", "1.", ".5", "0.", "+.5", "-1.0e-3", ".inf", "-.Inf", "+.INF", ".nan", ".NaN", ".",
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616",
	"2001-12-14", "2001-12-14T21:59:43.10Z", "2001-12-14 21:59:43.10", "2001-1-2", "10.100.0.1", "1:20", "1:20:30",
	"abc", "a b", "<<", "<a&b>", "é", "日本", "x#y", "a: b", "- x", "@x", "`x`", "%x", "!x", "&x", "*x",
	"|", ">", "'", "\"", "{", "}", "[", "]", ",", "?", "-", ":", "--", "+", "Yes ", "a\tb", "\\", "\u2028",
	"pool-0001", "FailOpen", "TCP", "Running", "inference.networking.k8s.io", "*.example.com",
}

// yaml11Keys: the first six are strings however written.
var yaml11Keys = []string{"a", "b", "name", "k", "a b", "é", "on", "yes", "n", "1", "0x1", "~", "", "<<", "true", "1.5"}

func genKey(r *rand.Rand) string {
	if r.IntN(5) > 0 {
		return genScalar(r, yaml11Keys[r.IntN(6)], true)
	}
	return genScalar(r, yaml11Keys[r.IntN(len(yaml11Keys))], true)
}

// genDocument writes a random document: a block mapping at the top, and
// below it block or flow collections and scalars in any quoting style.
func genDocument(r *rand.Rand) string {
	var b strings.Builder
	genBlockMapping(r, &b, 0, 3)
	if r.IntN(20) == 0 {
		b.WriteString("# a comment\n")
	}
	return b.String()
}

func genBlockMapping(r *rand.Rand, b *strings.Builder, indent, depth int) {
	pad := strings.Repeat(" ", indent)
	for range 1 + r.IntN(4) {
		b.WriteString(pad)
		b.WriteString(genKey(r))
		b.WriteString(":")
		genBlockValue(r, b, indent, depth)
	}
}

// genBlockValue writes what follows "key:" or "-".
func genBlockValue(r *rand.Rand, b *strings.Builder, indent, depth int) {
	switch k := r.IntN(10); {
	case depth > 0 && k == 0:
		b.WriteString("\n")
		genBlockMapping(r, b, indent+2, depth-1)
	case depth > 0 && k == 1:
		b.WriteString("\n")
		pad := strings.Repeat(" ", indent)
		for range 1 + r.IntN(3) {
			b.WriteString(pad + "-")
			genBlockValue(r, b, indent+2, depth-1)
		}
	case depth > 0 && k == 2:
		b.WriteString(" " + genFlow(r, depth-1) + "\n")
	case k == 3 && r.IntN(4) == 0:
		b.WriteString(" &x " + genScalar(r, yaml11Scalars[r.IntN(len(yaml11Scalars))], false) + "\n")
	case k == 4 && r.IntN(4) == 0:
		b.WriteString(" !!str " + genScalar(r, yaml11Scalars[r.IntN(len(yaml11Scalars))], false) + "\n")
	case k == 5 && r.IntN(2) == 0:
		b.WriteString(" |\n" + strings.Repeat(" ", indent+2) + yaml11Scalars[r.IntN(len(yaml11Scalars))] + "\n")
	default:
		b.WriteString(" " + genScalar(r, yaml11Scalars[r.IntN(len(yaml11Scalars))], false) + "\n")
	}
}

func genFlow(r *rand.Rand, depth int) string {
	n := r.IntN(3)
	parts := make([]string, n)
	mapping := r.IntN(2) == 0
	for i := range parts {
		var v string
		if depth > 0 && r.IntN(3) == 0 {
			v = genFlow(r, depth-1)
		} else {
			v = genScalar(r, yaml11Scalars[r.IntN(len(yaml11Scalars))], false)
		}
		if mapping {
			v = genKey(r) + ": " + v
		}
		parts[i] = v
	}
	if mapping {
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// genScalar writes s plain (mostly), single-quoted or double-quoted.
func genScalar(r *rand.Rand, s string, key bool) string {
	switch r.IntN(6) {
	case 0:
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	case 1:
		return strconv.Quote(s)
	}
	if key && r.IntN(30) == 0 {
		return fmt.Sprintf("? %s\n", s) // an explicit key
	}
	return s
}

// genManifest writes a random document in the block style of manifests:
// nested block mappings and sequences (compact or indented, sequences at
// their key's indentation or below), one-line scalars plain or quoted,
// comments, and now and then something outside blockDocument's subset.
func genManifest(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(4) == 0 {
		b.WriteString("# head comment\n")
	}
	genManifestMapping(r, &b, 0, "", 3)
	return b.String()
}

// genManifestMapping writes a mapping whose entries are at column indent;
// the first one follows first ("- " of a compact mapping) when not empty.
func genManifestMapping(r *rand.Rand, b *strings.Builder, indent int, first string, depth int) {
	for i := range 1 + r.IntN(4) {
		if i == 0 && first != "" {
			b.WriteString(first)
		} else {
			b.WriteString(strings.Repeat(" ", indent))
		}
		key := genKey(r)
		if r.IntN(16) > 0 {
			key = []string{"name", "spec", "app", "k8s.io/x-y_z", "'quoted key", "\"dq", "a1", "b2"}[r.IntN(8)] + strconv.Itoa(i)
			switch key[0] {
			case '\'', '"':
				key += key[:1]
			}
		}
		b.WriteString(key + ":")
		genManifestValue(r, b, indent, depth)
	}
}

// genManifestValue writes what follows "key:" at indentation indent.
func genManifestValue(r *rand.Rand, b *strings.Builder, indent, depth int) {
	step := []int{2, 2, 4, 1}[r.IntN(4)]
	switch k := r.IntN(8); {
	case depth > 0 && k == 0:
		b.WriteString(genComment(r) + "\n")
		genManifestMapping(r, b, indent+step, "", depth-1)
	case depth > 0 && k <= 2:
		b.WriteString(genComment(r) + "\n")
		seqIndent := indent
		if r.IntN(2) == 0 {
			seqIndent += step
		}
		genManifestSequence(r, b, seqIndent, depth-1)
	case k == 3 && r.IntN(3) == 0:
		b.WriteString(genComment(r) + "\n")
	default:
		b.WriteString(" " + genManifestScalar(r) + genComment(r) + "\n")
	}
}

func genManifestSequence(r *rand.Rand, b *strings.Builder, indent, depth int) {
	pad := strings.Repeat(" ", indent)
	for range 1 + r.IntN(3) {
		dash := "-" + strings.Repeat(" ", 1+r.IntN(2)*r.IntN(3))
		switch k := r.IntN(6); {
		case depth > 0 && k <= 1:
			genManifestMapping(r, b, indent+len(dash), pad+dash, depth-1)
		case depth > 0 && k == 2:
			b.WriteString(pad + "-" + genComment(r) + "\n")
			genManifestMapping(r, b, indent+2, "", depth-1)
		case depth > 0 && k == 3 && r.IntN(2) == 0:
			b.WriteString(pad + dash)
			genManifestSequence(r, b, indent+len(dash), depth-1)
		default:
			b.WriteString(pad + dash + genManifestScalar(r) + genComment(r) + "\n")
		}
	}
}

// genManifestScalar: a printable-ASCII scalar from yaml11Scalars, plain or
// quoted; or, rarely, something blockDocument leaves to the others.
func genManifestScalar(r *rand.Rand) string {
	switch r.IntN(150) {
	case 0:
		return "[a, b]"
	case 1:
		return "|\n  block"
	case 2:
		return "&a x"
	case 3:
		return "\"esc\\\"aped\""
	case 4:
		return "'it''s'"
	}
	if r.IntN(8) > 0 {
		return manifestScalars[r.IntN(len(manifestScalars))]
	}
	for {
		s := yaml11Scalars[r.IntN(len(yaml11Scalars))]
		if strings.IndexFunc(s, func(c rune) bool { return c < 0x20 || c > 0x7e }) < 0 {
			switch r.IntN(5) {
			case 0:
				return "'" + strings.ReplaceAll(s, "'", "''") + "'"
			case 1:
				if !strings.ContainsAny(s, "\\\"") {
					return "\"" + s + "\""
				}
			}
			return s
		}
	}
}

// manifestScalars are what manifests mostly hold, each read the same
// plain or quoted (a quoted "True" is a string, a plain one a boolean).
var manifestScalars = []string{
	"vllm", "example.invalid/vllm:v1.2", "llm-namespace", "'True'", "\"8000\"", "8000", "true", "Running",
	"10.100.0.1", "app.kubernetes.io/name", "a b c", "x,y", "\"*.example.com\"", "''", "FailOpen", "-1", "0",
}

func genComment(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0:
		return " # comment"
	case 1:
		return "   #"
	case 2:
		return "#not"
	}
	return ""
}
