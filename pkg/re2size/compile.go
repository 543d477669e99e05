// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package re2size

import (
	"errors"
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// The instruction kinds of an RE2 program (re2/prog.h). AltMatch is not
// modelled: RE2 makes it only from an Alt looping over a [00-FF] byte
// range next to a match, which in UTF-8 mode only the unanchored prefix
// has, and Optimize never reaches that prefix.
type opcode uint8

const (
	opFail opcode = iota
	opAlt
	opByteRange
	opCapture
	opEmptyWidth
	opNop
	opMatch
)

type inst struct {
	op        opcode
	out, out1 int
}

// hole is an unfilled successor: out, or out1 when second.
type hole struct {
	id     int
	second bool
}

// frag is a compiled fragment (re2/compile.cc Frag); begin 0 is the
// fragment that matches nothing.
type frag struct {
	begin    int
	end      []hole
	nullable bool
}

// maxInst bounds the work; RE2's own budget (8 MiB of max_mem, two thirds
// for the forward program) allows fewer instructions than this.
const maxInst = 1 << 20

var errTooLarge = errors.New("pattern too large - compile failed")

// compiler builds the program before flattening, allocating instructions
// in the order RE2 does: children before their parent.
type compiler struct {
	inst   []inst
	failed bool
}

func newCompiler() *compiler { return &compiler{inst: []inst{{op: opFail}}} }

func (c *compiler) alloc(in inst) int {
	if len(c.inst) >= maxInst {
		c.failed = true
		return 0
	}
	c.inst = append(c.inst, in)
	return len(c.inst) - 1
}

func (c *compiler) patch(l []hole, to int) {
	for _, h := range l {
		if h.second {
			c.inst[h.id].out1 = to
		} else {
			c.inst[h.id].out = to
		}
	}
}

func one(id int, second bool) []hole { return []hole{{id, second}} }

func join(a, b []hole) []hole {
	out := make([]hole, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// leaf is a one-instruction fragment whose out is open.
func (c *compiler) leaf(op opcode, nullable bool) frag {
	id := c.alloc(inst{op: op})
	if id == 0 {
		return frag{}
	}
	return frag{id, one(id, false), nullable}
}

func (c *compiler) byteRange() frag  { return c.leaf(opByteRange, false) }
func (c *compiler) nop() frag        { return c.leaf(opNop, true) }
func (c *compiler) emptyWidth() frag { return c.leaf(opEmptyWidth, true) }

// cat is Compiler::Cat (forward): a leading no-op whose only hole is its
// own out is skipped.
func (c *compiler) cat(a, b frag) frag {
	if a.begin == 0 || b.begin == 0 {
		return frag{}
	}
	if in := c.inst[a.begin]; in.op == opNop && in.out == 0 && len(a.end) == 1 && a.end[0] == (hole{a.begin, false}) {
		c.patch(a.end, b.begin)
		return b
	}
	c.patch(a.end, b.begin)
	return frag{a.begin, b.end, a.nullable && b.nullable}
}

func (c *compiler) alt(a, b frag) frag {
	if a.begin == 0 {
		return b
	}
	if b.begin == 0 {
		return a
	}
	id := c.alloc(inst{op: opAlt, out: a.begin, out1: b.begin})
	if id == 0 {
		return frag{}
	}
	return frag{id, join(a.end, b.end), a.nullable || b.nullable}
}

// loop allocates the Alt of x+, x* or x?: the preferred branch enters a,
// the other is left open.
func (c *compiler) loopAlt(a frag, nongreedy bool) (int, []hole) {
	in := inst{op: opAlt, out: a.begin}
	if nongreedy {
		in = inst{op: opAlt, out1: a.begin}
	}
	id := c.alloc(in)
	return id, one(id, !nongreedy)
}

func (c *compiler) plus(a frag, nongreedy bool) frag {
	id, open := c.loopAlt(a, nongreedy)
	if id == 0 {
		return frag{}
	}
	c.patch(a.end, id)
	return frag{a.begin, open, a.nullable}
}

func (c *compiler) star(a frag, nongreedy bool) frag {
	if a.nullable {
		return c.quest(c.plus(a, nongreedy), nongreedy)
	}
	id, open := c.loopAlt(a, nongreedy)
	if id == 0 {
		return frag{}
	}
	c.patch(a.end, id)
	return frag{id, open, true}
}

func (c *compiler) quest(a frag, nongreedy bool) frag {
	if a.begin == 0 {
		return c.nop()
	}
	id, open := c.loopAlt(a, nongreedy)
	if id == 0 {
		return frag{}
	}
	return frag{id, join(open, a.end), true}
}

func (c *compiler) capture(a frag) frag {
	if a.begin == 0 {
		return frag{}
	}
	id := c.alloc(inst{op: opCapture, out: a.begin})
	id1 := c.alloc(inst{op: opCapture})
	if id == 0 || id1 == 0 {
		return frag{}
	}
	c.patch(a.end, id1)
	return frag{id, one(id1, false), a.nullable}
}

// literal is one rune: its UTF-8 bytes in sequence. A case-folded rune is
// one byte range with RE2's fold flag when its orbit is an ASCII letter
// pair, else the class of its orbit (RE2's parser makes that class).
func (c *compiler) literal(r rune, fold bool) frag {
	if fold {
		orbit := foldOrbit(r)
		if len(orbit) > 4 || (len(orbit) == 4 && !asciiPair(orbit)) {
			return c.class(orbit)
		}
	}
	if r < utf8.RuneSelf {
		return c.byteRange()
	}
	n := utf8.RuneLen(r)
	if n < 0 {
		n = 3 // U+FFFD
	}
	f := c.byteRange()
	for i := 1; i < n; i++ {
		f = c.cat(f, c.byteRange())
	}
	return f
}

// foldOrbit is r with its simple case folds, as [lo, hi] pairs of single
// runes.
func foldOrbit(r rune) []rune {
	out := []rune{r, r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		out = append(out, f, f)
	}
	return out
}

func asciiPair(o []rune) bool {
	a, b := o[0], o[2]
	return a < utf8.RuneSelf && b < utf8.RuneSelf && unicode.IsLetter(a) && unicode.IsLetter(b)
}

// walk compiles a simplified syntax tree (no OpRepeat left).
func (c *compiler) walk(re *syntax.Regexp) frag {
	if c.failed {
		return frag{}
	}
	nongreedy := re.Flags&syntax.NonGreedy != 0
	switch re.Op {
	case syntax.OpNoMatch:
		return frag{}
	case syntax.OpEmptyMatch:
		return c.nop()
	case syntax.OpLiteral:
		var f frag
		for i, r := range re.Rune {
			l := c.literal(r, re.Flags&syntax.FoldCase != 0)
			if i == 0 {
				f = l
			} else {
				f = c.cat(f, l)
			}
		}
		if len(re.Rune) == 0 {
			return c.nop()
		}
		return f
	case syntax.OpCharClass:
		return c.class(re.Rune)
	case syntax.OpAnyCharNotNL:
		return c.class([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune})
	case syntax.OpAnyChar:
		return c.class([]rune{0, unicode.MaxRune})
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return c.emptyWidth()
	case syntax.OpCapture:
		return c.capture(c.walk(re.Sub[0]))
	case syntax.OpStar:
		return c.star(c.walk(re.Sub[0]), nongreedy)
	case syntax.OpPlus:
		return c.plus(c.walk(re.Sub[0]), nongreedy)
	case syntax.OpQuest:
		return c.quest(c.walk(re.Sub[0]), nongreedy)
	case syntax.OpConcat, syntax.OpAlternate:
		return c.list(re)
	}
	c.failed = true // OpRepeat survives only a failed Simplify
	return frag{}
}

// list compiles every child first, then joins them, as RE2's post-order
// walk does.
func (c *compiler) list(re *syntax.Regexp) frag {
	if len(re.Sub) == 0 {
		if re.Op == syntax.OpConcat {
			return c.nop()
		}
		return frag{}
	}
	subs := make([]frag, len(re.Sub))
	for i, s := range re.Sub {
		subs[i] = c.walk(s)
	}
	f := subs[0]
	for _, s := range subs[1:] {
		if re.Op == syntax.OpConcat {
			f = c.cat(f, s)
		} else {
			f = c.alt(f, s)
		}
	}
	return f
}
