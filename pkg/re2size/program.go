// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package re2size

import "regexp/syntax"

// programSize is Compiler::Compile then Compiler::Finish (re2/compile.cc)
// for a simplified tree: anchors stripped, the fragment followed by a
// match, the unanchored .*? prefix unless anchored at the start, then
// Prog::Optimize and Prog::Flatten; the result is the flattened count.
func programSize(re *syntax.Regexp) (int, error) {
	re, anchorStart := stripAnchor(re, 0, true)
	re, _ = stripAnchor(re, 0, false)
	c := newCompiler()
	all := c.walk(re)
	all = c.cat(all, frag{begin: c.alloc(inst{op: opMatch})})
	start := all.begin
	if !anchorStart {
		dot := c.byteRange()
		all = c.cat(c.star(dot, true), all)
	}
	if c.failed {
		return 0, errTooLarge
	}
	p := &program{inst: c.inst, start: start, startUnanchored: all.begin}
	if p.start == 0 && p.startUnanchored == 0 {
		return 1, nil // nothing can match: the fail instruction only
	}
	p.optimize()
	return p.flatten(), nil
}

// stripAnchor is IsAnchorStart (atStart) or IsAnchorEnd: a \A (\z) reached
// through at most four levels of the first (last) element of a
// concatenation or of a capture becomes an empty match, and reports true.
func stripAnchor(re *syntax.Regexp, depth int, atStart bool) (*syntax.Regexp, bool) {
	if re == nil || depth >= 4 {
		return re, false
	}
	anchor := syntax.OpEndText
	if atStart {
		anchor = syntax.OpBeginText
	}
	switch re.Op {
	case anchor:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch, Flags: re.Flags}, true
	case syntax.OpCapture:
		if s, ok := stripAnchor(re.Sub[0], depth+1, atStart); ok {
			cp := *re
			cp.Sub = []*syntax.Regexp{s}
			return &cp, true
		}
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return re, false
		}
		i := len(re.Sub) - 1
		if atStart {
			i = 0
		}
		if s, ok := stripAnchor(re.Sub[i], depth+1, atStart); ok {
			cp := *re
			cp.Sub = append([]*syntax.Regexp(nil), re.Sub...)
			cp.Sub[i] = s
			return &cp, true
		}
	}
	return re, false
}

// requiredPrefixSuffix is Regexp::RequiredPrefix (re2/regexp.cc) on the
// parsed, unsimplified tree: a concatenation of one or more \A, a literal
// and the rest yields the rest. Of a case-folded literal only the runes
// RE2's parser keeps in a literal (folds that are at most an ASCII letter
// pair) count; a rune RE2 makes a class of ends the prefix.
func requiredPrefixSuffix(re *syntax.Regexp) (*syntax.Regexp, bool) {
	if re.Op != syntax.OpConcat {
		return nil, false
	}
	i := 0
	for i < len(re.Sub) && re.Sub[i].Op == syntax.OpBeginText {
		i++
	}
	if i == 0 || i >= len(re.Sub) || re.Sub[i].Op != syntax.OpLiteral {
		return nil, false
	}
	lit := re.Sub[i]
	k := len(lit.Rune)
	if lit.Flags&syntax.FoldCase != 0 {
		for j, r := range lit.Rune {
			if o := foldOrbit(r); len(o) > 4 || (len(o) == 4 && !asciiPair(o)) {
				k = j
				break
			}
		}
	}
	if k == 0 {
		return nil, false
	}
	rest := append([]*syntax.Regexp(nil), re.Sub[i+1:]...)
	if k < len(lit.Rune) {
		tail := *lit
		tail.Rune = lit.Rune[k:]
		rest = append([]*syntax.Regexp{&tail}, rest...)
	}
	if len(rest) == 0 {
		return &syntax.Regexp{Op: syntax.OpEmptyMatch, Flags: re.Flags}, true
	}
	return &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags, Sub: rest}, true
}
