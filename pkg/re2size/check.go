// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package re2size

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"strings"
)

// RuntimeKey is the Envoy runtime key whose value is the largest program
// size Envoy accepts.
const RuntimeKey = "re2.max_program_size.error_level"

// EnvoyDefaultMax is Envoy's value of RuntimeKey when no runtime layer sets
// it (source/common/runtime/runtime_features.cc).
const EnvoyDefaultMax = 100

// TooLargeError is a regular expression whose program is larger than the
// limit. Its message is Envoy's (source/common/common/regex.cc).
type TooLargeError struct {
	Regex string
	Size  int
	Max   uint32
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("regex '%s' RE2 program size of %d > max program size of %d set for the error level threshold. "+
		"Increase configured max program size if necessary.", e.Regex, e.Size, e.Max)
}

// Check returns nil when RE2 accepts re and its program size is at most
// max; a *TooLargeError when it is larger; another error when RE2 refuses
// re (or Check cannot vouch that it accepts it, see the package doc).
func Check(re string, max uint32) error {
	n, err := ProgramSize(re)
	if err != nil {
		return err
	}
	if uint64(n) > uint64(max) {
		return &TooLargeError{Regex: re, Size: n, Max: max}
	}
	return nil
}

// ProgramSize returns a bound, never lower, of RE2's ProgramSize() for re
// compiled with RE2's default options, or an error when re is refused: the
// model's count (Model) plus its margin (half of it, and 2).
func ProgramSize(re string) (int, error) {
	n, err := Model(re)
	if err != nil {
		return 0, err
	}
	return n + n/2 + 2, nil
}

// Model is RE2's ProgramSize() computed on Go's parse of re (see the
// package doc); it equals RE2's figure when Go's parser factors re as
// RE2's does, and may be lower when it does not, which the margin of
// ProgramSize covers.
func Model(re string) (int, error) {
	tree, err := parse(re)
	if err != nil {
		return 0, err
	}
	n, err := programSize(tree.Simplify())
	if err != nil {
		return 0, err
	}
	// RE2::Init compiles a pattern that starts with \A and a literal
	// without them (Regexp::RequiredPrefix), as an unanchored program.
	if suffix, ok := requiredPrefixSuffix(tree); ok {
		if n, err = programSize(suffix.Simplify()); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// parse is RE2's parse with its default options (Go's syntax.Perl), plus
// the refusals Go's parser does not make.
func parse(re string) (*syntax.Regexp, error) {
	if err := re2Only(re); err != nil {
		return nil, err
	}
	return syntax.Parse(re, syntax.Perl)
}

// Errors for syntax Go accepts and Check does not.
var (
	ErrUnicodeClass = errors.New("unicode classes (\\p, \\P) are not accepted: their RE2 program size depends on the Unicode tables of the Envoy build")
	ErrAngleName    = errors.New("named group (?<name>...) is not accepted by older RE2 releases: write (?P<name>...) or (?:...)")
)

// re2Only scans re for the constructs of ErrUnicodeClass and ErrAngleName,
// skipping escaped characters, \Q...\E quotes and bracket classes.
func re2Only(re string) error {
	inClass, inQuote := false, false
	for i := 0; i < len(re); i++ {
		c := re[i]
		switch {
		case inQuote:
			if strings.HasPrefix(re[i:], `\E`) {
				inQuote = false
				i++
			}
		case c == '\\' && i+1 < len(re):
			switch re[i+1] {
			case 'Q':
				inQuote = !inClass
			case 'p', 'P':
				return fmt.Errorf("%w: at offset %d of %q", ErrUnicodeClass, i, re)
			}
			i++
		case inClass:
			if c == '[' && i+1 < len(re) && re[i+1] == ':' {
				if end := strings.Index(re[i+2:], ":]"); end >= 0 {
					i += end + 3
				}
			} else if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			if i+1 < len(re) && re[i+1] == '^' {
				i++
			}
			if i+1 < len(re) && re[i+1] == ']' {
				i++ // a leading ']' is a literal
			}
		case strings.HasPrefix(re[i:], "(?<") && i+3 < len(re) && re[i+3] != '=' && re[i+3] != '!':
			return fmt.Errorf("%w: at offset %d of %q", ErrAngleName, i, re)
		}
	}
	return nil
}
