// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"errors"
	"fmt"
	"sync"

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
	return regexChecks.check(re)
}

// regexChecks remembers checkRegex's answers: the controller checks every
// rule of a changed route (CheckRoute) and the translator checks it again
// (buildRule), and a tenant that rewrites ten thousand routes usually
// leaves their expressions as they were, so most checks are look-ups. The
// answer depends on the expression alone.
var regexChecks = &regexMemo{max: 1 << 15}

// regexMemo keeps up to about 2*max answers: new ones go to cur; when cur
// is full it becomes prev (still read) and cur starts empty, so what is in
// use stays and what is not falls out after two rounds.
type regexMemo struct {
	mu        sync.Mutex
	max       int
	cur, prev map[string]error
}

func (m *regexMemo) check(re string) error {
	m.mu.Lock()
	if err, ok := m.cur[re]; ok {
		m.mu.Unlock()
		return err
	}
	if err, ok := m.prev[re]; ok {
		m.put(re, err)
		m.mu.Unlock()
		return err
	}
	m.mu.Unlock()
	err := checkRegexUncached(re)
	m.mu.Lock()
	m.put(re, err)
	m.mu.Unlock()
	return err
}

func (m *regexMemo) put(re string, err error) {
	if len(m.cur) >= m.max || m.cur == nil {
		m.prev, m.cur = m.cur, make(map[string]error, m.max)
	}
	m.cur[re] = err
}

func checkRegexUncached(re string) error {
	err := re2size.Check(re, bootstrap.RE2MaxProgramSize)
	var tl *re2size.TooLargeError
	if errors.As(err, &tl) {
		return fmt.Errorf("its RE2 program has up to %d instructions, more than the %d Envoy is configured to accept (%s)",
			tl.Size, tl.Max, re2size.RuntimeKey)
	}
	return err
}
