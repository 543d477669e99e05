// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/infermesh/infermesh/pkg/re2size"
)

// regexEngine compiles the regexes of xDS resources as Envoy's google_re2
// engine does (source/common/common/regex.cc, CompiledGoogleReMatcher):
// the pattern must parse as RE2, and its RE2 program may not be larger
// than the runtime's re2.max_program_size.error_level (maxProgramSize,
// from the bootstrap's layered_runtime, runtime.go), or the resource is
// refused with Envoy's message. The size is re2size's bound, never lower
// than RE2's count (stricter than Envoy near the limit). Patterns RE2
// accepts and re2size cannot bound (Unicode classes) are refused as not
// implemented.
type regexEngine struct {
	maxProgramSize uint32
	// checked: the pattern was accepted when its resource was compiled;
	// a recompilation while serving skips the checks.
	checked bool
}

// defaultRegexEngine is the engine of an Envoy whose runtime sets no
// limit.
var defaultRegexEngine = regexEngine{maxProgramSize: re2size.EnvoyDefaultMax}

// recompile is for regexes of a resource already accepted.
var recompile = regexEngine{checked: true}

// compile returns pattern compiled for Go's matcher; full makes it match
// only the whole input (Envoy's safe_regex matchers use RE2::FullMatch).
func (e regexEngine) compile(pattern string, full bool) (*regexp.Regexp, error) {
	if !e.checked {
		if err := e.check(pattern); err != nil {
			return nil, err
		}
	}
	if full {
		pattern = `^(?:` + pattern + `)$`
	}
	return regexp.Compile(pattern)
}

func (e regexEngine) check(pattern string) error {
	err := re2size.Check(pattern, e.maxProgramSize)
	var tl *re2size.TooLargeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tl):
		return &InvalidConfigError{Source: "source/common/common/regex.cc", Reason: tl.Error()}
	case errors.Is(err, re2size.ErrUnicodeClass):
		return fmt.Errorf("regex %q not implemented: %w", pattern, err)
	}
	return &InvalidConfigError{Source: "source/common/common/regex.cc", Reason: err.Error(), At: pattern}
}
