// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// escapeCell makes s safe to print in an operator's terminal: printable
// text is kept as is, and every rune that is not printable (newline, tab,
// ESC and the other control characters, bidirectional overrides, invalid
// UTF-8) is written as Go's strconv.Quote spells it (\n, \t, \x1b,
// \u202e), without the quotes. Node ids, Gateway names and NACK messages
// come from proxies, so a proxy could otherwise move the cursor, recolour
// the terminal or forge table rows.
func escapeCell(s string) string {
	if isPrintable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// isPrintable reports whether s is valid UTF-8 of printable runes only.
func isPrintable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
