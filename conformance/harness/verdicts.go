// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Verdicts are Go's own results for the suite's tests, read from the
// suite binary's -test.v output: the "--- PASS/FAIL/SKIP:" line that the
// testing package prints for each subtest TestConformance/<ShortName>.
// They are what a test's result is judged by: the suite's report is
// built from its own bookkeeping, which can call a test passed that Go
// failed (the Gateway API suite v1.6.1 does so for failing Parallel
// tests; gateway-api-conformance.md), so the harness reads both and
// refuses a report that disagrees (Check).
type Verdicts map[string]string

// verdictLine matches a first-level subtest's verdict; deeper subtests
// (TestConformance/<ShortName>/<step>) have a further slash and are not
// matched.
var verdictLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): TestConformance/([^/\s]+) \(`)

// ParseVerdicts reads Go's verdict lines from the suite's output.
func ParseVerdicts(r io.Reader) (Verdicts, error) {
	v := Verdicts{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if m := verdictLine.FindStringSubmatch(sc.Text()); m != nil {
			v[m[2]] = m[1]
		}
	}
	return v, sc.Err()
}

// Count returns how many tests had each verdict.
func (v Verdicts) Count() (passed, failed, skipped int) {
	for _, r := range v {
		switch r {
		case "PASS":
			passed++
		case "FAIL":
			failed++
		case "SKIP":
			skipped++
		}
	}
	return passed, failed, skipped
}

// Failed returns the tests Go failed, sorted.
func (v Verdicts) Failed() []string {
	var out []string
	for name, r := range v {
		if r == "FAIL" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Summary is the last line of `make conformance`, by Go's verdicts.
func (v Verdicts) Summary() string {
	p, f, s := v.Count()
	return fmt.Sprintf("%d passed, %d failed, %d skipped", p, f, s)
}

// ReportStats are the totals and failed tests of a suite report, over its
// profiles' core and extended parts.
type ReportStats struct {
	Passed, Failed, Skipped int
	FailedTests             []string
}

// Check compares the verdicts with the report's figures and returns
// every disagreement; nil when they agree. A test Go failed must be
// counted and listed failed by the report, and the pass counts must be
// equal. Skips are not compared: with -run-test the suite records tests
// it never started as skipped, which Go prints no line for.
func (v Verdicts) Check(r ReportStats) error {
	p, f, _ := v.Count()
	var problems []string
	if len(v) == 0 {
		problems = append(problems, "the suite's output has no verdict line for any test")
	}
	if p != r.Passed {
		problems = append(problems, fmt.Sprintf("Go passed %d tests, the report says %d", p, r.Passed))
	}
	if f != r.Failed {
		problems = append(problems, fmt.Sprintf("Go failed %d tests (%s), the report says %d", f, strings.Join(v.Failed(), ", "), r.Failed))
	}
	for _, name := range v.Failed() {
		if !slices.Contains(r.FailedTests, name) {
			problems = append(problems, fmt.Sprintf("Go failed %s, the report does not list it as failed", name))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the suite's report disagrees with Go's verdicts: %s", strings.Join(problems, "; "))
	}
	return nil
}
