// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package re2size says whether Envoy's RE2 engine (envoy.regex_engines.
// google_re2) accepts a regular expression, and bounds the program size
// Envoy compares with its runtime limit.
//
// Envoy compiles every safe_regex of a route configuration with RE2 and
// refuses the whole configuration when the compiled program is larger than
// the runtime key re2.max_program_size.error_level (default 100), with the
// message "regex '<re>' RE2 program size of <n> > max program size of <m>
// set for the error level threshold. Increase configured max program size
// if necessary." (source/common/common/regex.cc, CompiledGoogleReMatcher;
// the key is read through source/common/runtime/runtime_features.cc). The
// size is RE2's RE2::ProgramSize(): the instruction count of the forward
// program after Prog::Flatten (re2/re2.cc, re2/compile.cc, re2/prog.cc).
//
// # What it computes
//
// Go's regexp/syntax is a port of RE2's parser but has no compiler that
// counts as RE2 does, so Model rebuilds RE2's program from Go's
// simplified syntax tree, following re2/compile.cc (fragments, patch lists,
// the no-op elision of Cat, Star of a nullable fragment as (x+)?, the
// removal of a leading \A and trailing \z, the unanchored .*? prefix),
// re2/re2.cc (RE2::Init compiles a pattern that starts with \A and a
// literal without them, Regexp::RequiredPrefix) and re2/prog.cc
// (Optimize's no-op bypass, then Flatten's successor roots, dominator
// roots and one list per root), and returns the flattened count.
//
// Where it departs from RE2 it counts more:
//   - A character class is compiled to UTF-8 byte ranges as RE2 splits
//     them (AddRuneRangeUTF8, including its shared 80-10FFFF form), but
//     without RE2's common-prefix trie and common-suffix cache, and
//     without the ASCII case-folding shortcut; each only removes
//     instructions in RE2.
//   - A case-folded literal whose fold orbit is more than an ASCII letter
//     pair is charged as the class of its orbit.
//   - RE2 simplifications Go does not make (coalescing adjacent repeats,
//     repeats of empty-width assertions) only shrink RE2's program.
//
// One departure can count less: Go's parser merges and factors
// alternations at other moments than RE2's (k|k|. is one class in Go,
// k(?:)|[^\n] in RE2), and simplifies nested empty repeats differently.
// ProgramSize therefore adds a margin to Model: half of it, plus 2.
//
// # How it was checked
//
// Against RE2 2022-06-01 (Debian's libre2-9, RE2(p, RE2::Quiet).
// ProgramSize(), the call Envoy makes) on 7,000 random patterns over
// literals, classes, groups, alternations, repeats, anchors, \b, (?i),
// (?s) and non-ASCII runes: Model was exact for 4,075, higher for 2,847
// (mostly non-ASCII classes) and lower for 78, by at most a third;
// ProgramSize was never lower. Of 1,511 ASCII-only patterns Model was
// exact for 1,381 and lower for 4. The tests pin figures from RE2's own
// compile tests, an Envoy error message and that RE2 build.
//
// # What it refuses beyond Go's parser
//
// Check parses with the flags RE2's default options give (Perl classes,
// \b, non-greedy operators, one-line mode: Go's syntax.Perl) and also
// refuses:
//   - Unicode classes (\p, \P): their ranges, so the program size, depend
//     on the Unicode tables of the Envoy build, and a script Go knows may
//     be unknown to that RE2;
//   - the (?<name>...) form of a named group, which RE2 releases before
//     2023-08 refuse (RE2 2022-06-01: "invalid perl operator: (?<");
//     (?P<name>...) is accepted everywhere.
//
// Repeat counts above 1000, and nested repeats whose product exceeds
// 1000, are refused by Go's parser exactly as by RE2's (RepetitionWalker);
// forms Go refuses and RE2 accepts (a**, \C) stay refused.
//
// # Files
//
//   - check.go: Check, ProgramSize and Model, and the refusals beyond Go's
//     parser (Unicode classes, (?<name>).
//   - compile.go: the compiler of Go's simplified syntax tree into RE2's
//     instructions, fragment by fragment as re2/compile.cc does.
//   - class.go: character classes compiled to UTF-8 byte ranges as RE2's
//     AddRuneRangeUTF8 does.
//   - program.go: programSize: anchors stripped, the required prefix, the
//     unanchored prefix, and the flattened count.
//   - flatten.go: Prog::Optimize's no-op bypass and Prog::Flatten's roots and
//     lists, counted.
package re2size
