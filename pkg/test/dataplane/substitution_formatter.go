// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"fmt"
	"regexp"
	"strings"
)

// substitutionFormatterSource is the Envoy file this one follows.
const substitutionFormatterSource = "source/common/formatter/substitution_formatter.cc"

// formatCommand is Envoy's commandWithArgsRegex: % COMMAND (SUBCOMMAND)
// :LENGTH %, anchored where a '%' opens a command. Go's regexp is RE2, as
// Envoy's.
var formatCommand = regexp.MustCompile(`^%([A-Z0-9_]+)(?:\((.*?)\))?(?::([0-9]+))?%`)

// parseFormat is SubstitutionFormatParser::parse for a format string that
// holds only literal text, which it returns formatted: "%%" is one '%'.
// Any other '%' must open a command: one that does not is invalid, as in
// Envoy (an *InvalidConfigError with Envoy's message); one that does is a
// command this data plane does not run, refused as not implemented (Envoy
// would run it, or refuse an unknown one).
func parseFormat(format string) (string, error) {
	if !strings.Contains(format, "%") {
		return format, nil
	}
	var b strings.Builder
	for pos := 0; pos < len(format); {
		if format[pos] != '%' {
			b.WriteByte(format[pos])
			pos++
			continue
		}
		if pos+1 < len(format) && format[pos+1] == '%' {
			b.WriteByte('%')
			pos += 2
			continue
		}
		if m := formatCommand.FindStringSubmatch(format[pos:]); m != nil {
			return "", fmt.Errorf("substitution format command %%%s%% in %q not implemented", m[1], format)
		}
		return "", &InvalidConfigError{
			Source: substitutionFormatterSource,
			Reason: fmt.Sprintf("Incorrect configuration: %s. Couldn't find valid command at position %d", format, pos),
		}
	}
	return b.String(), nil
}
