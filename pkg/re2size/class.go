// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package re2size

import "unicode/utf8"

// classBuilder is a character class being compiled (Compiler::BeginRange,
// AddRuneRangeUTF8, EndRange in re2/compile.cc), without RE2's prefix trie
// and suffix cache: each byte sequence is its own chain and its leading
// byte range joins the others through an Alt. Both RE2 mechanisms only
// remove instructions, so the count here is never lower.
type classBuilder struct {
	c     *compiler
	begin int
	end   []hole
}

// class compiles the ranges (pairs lo, hi) of a class.
func (c *compiler) class(ranges []rune) frag {
	b := &classBuilder{c: c}
	for i := 0; i+1 < len(ranges); i += 2 {
		b.add(ranges[i], ranges[i+1])
	}
	if b.begin == 0 || c.failed {
		return frag{}
	}
	return frag{b.begin, b.end, false}
}

// suffix allocates a byte range that goes to next, or is left open (next 0).
func (b *classBuilder) suffix(next int) int {
	id := b.c.alloc(inst{op: opByteRange, out: next})
	if id != 0 && next == 0 {
		b.end = append(b.end, hole{id, false})
	}
	return id
}

// addSuffix joins a sequence whose head is id to the class.
func (b *classBuilder) addSuffix(id int) {
	if id == 0 {
		return
	}
	if b.begin == 0 {
		b.begin = id
		return
	}
	b.begin = b.c.alloc(inst{op: opAlt, out: b.begin, out1: id})
}

// maxRune is the largest rune of an n-byte UTF-8 sequence.
func maxRune(n int) rune {
	if n == 1 {
		return 0x7f
	}
	return 1<<(8-(n+1)+6*(n-1)) - 1
}

// add is AddRuneRangeUTF8: 80-10FFFF as RE2's shared form, else split into
// ranges of one encoded length whose runes agree on their leading bytes,
// each one chain of byte ranges.
func (b *classBuilder) add(lo, hi rune) {
	if lo > hi {
		return
	}
	if lo == 0x80 && hi == 0x10ffff {
		b.add80to10ffff()
		return
	}
	for n := 1; n < utf8.UTFMax; n++ {
		if m := maxRune(n); lo <= m && m < hi {
			b.add(lo, m)
			b.add(m+1, hi)
			return
		}
	}
	if hi < utf8.RuneSelf {
		b.addSuffix(b.suffix(0))
		return
	}
	for i := 1; i < utf8.UTFMax; i++ {
		m := rune(1)<<(6*i) - 1 // the last i bytes of a sequence
		if lo&^m != hi&^m {
			if lo&m != 0 {
				b.add(lo, lo|m)
				b.add((lo|m)+1, hi)
				return
			}
			if hi&m != m {
				b.add(lo, (hi&^m)-1)
				b.add(hi&^m, hi)
				return
			}
		}
	}
	id := 0
	for i := utf8.RuneLen(lo); i > 0; i-- {
		id = b.suffix(id)
	}
	b.addSuffix(id)
}

// add80to10ffff is RE2's Add_80_10ffff (forward): three leading byte
// ranges sharing one chain of continuation bytes.
func (b *classBuilder) add80to10ffff() {
	cont1 := b.suffix(0)
	b.addSuffix(b.c.alloc(inst{op: opByteRange, out: cont1}))
	cont2 := b.c.alloc(inst{op: opByteRange, out: cont1})
	b.addSuffix(b.c.alloc(inst{op: opByteRange, out: cont2}))
	cont3 := b.c.alloc(inst{op: opByteRange, out: cont2})
	b.addSuffix(b.c.alloc(inst{op: opByteRange, out: cont3}))
}
