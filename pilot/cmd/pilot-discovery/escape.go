// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
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

// errorText is err as main prints it, every line escaped (escapeCell): an
// error may quote a file or object name from a manifest, which must not
// reach the terminal as control characters. The line break before a hint
// (withHint) is the only one kept.
func errorText(err error) string {
	msg := err.Error()
	var h *hintError
	if errors.As(err, &h) {
		if base, ok := strings.CutSuffix(msg, "\nhint: "+h.hint); ok {
			return escapeCell(base) + "\nhint: " + escapeCell(h.hint)
		}
	}
	return escapeCell(msg)
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
