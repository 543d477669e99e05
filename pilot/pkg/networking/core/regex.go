// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"errors"
	"fmt"

	"github.com/infermesh/infermesh/pkg/bootstrap"
	"github.com/infermesh/infermesh/pkg/re2size"
)

// checkRegex says whether the Gateway's Envoy accepts re as a safe_regex:
// RE2 must parse it (re2size.Check also refuses the syntax Go's parser
// takes and RE2 does not, and Unicode classes), and its RE2 program must
// fit the limit our bootstrap sets (bootstrap.RE2MaxProgramSize, runtime
// key re2.max_program_size.error_level). Envoy refuses the whole route
// configuration otherwise (source/common/common/regex.cc). The program
// size is re2size.ProgramSize's bound, never lower than RE2's count, so a
// regex within a few percent of the limit may be refused here while Envoy
// would take it.
func checkRegex(re string) error {
	err := re2size.Check(re, bootstrap.RE2MaxProgramSize)
	var tl *re2size.TooLargeError
	if errors.As(err, &tl) {
		return fmt.Errorf("its RE2 program has up to %d instructions, more than the %d Envoy is configured to accept (%s)",
			tl.Size, tl.Max, re2size.RuntimeKey)
	}
	return err
}
