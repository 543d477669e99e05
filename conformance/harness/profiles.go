// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// TestList is what the Gateway API suite knows of its tests and
// conformance profiles, as conformance/harness/testlist prints it
// (hack/images.sh caches it as tests.tsv beside the suite binary). The
// harness counts Go's verdicts by profile with it: the suite's report
// cannot be trusted for that (gateway-api-conformance.md, "The trap").
type TestList struct {
	// Tests are the suite's tests in its own order.
	Tests []SuiteTest
	// Profiles are the profiles' feature sets, by profile name.
	Profiles map[string]ProfileFeatures
}

// SuiteTest is one test of the suite.
type SuiteTest struct {
	Name        string
	Parallel    bool
	Provisional bool
	Features    []string
}

// ProfileFeatures are a conformance profile's core and extended features.
type ProfileFeatures struct {
	Core, Extended []string
}

// ReadTestList reads testlist's output: "profile NAME core|extended
// FEATURES" and "test NAME PARALLEL PROVISIONAL FEATURES" lines, tab
// separated, features comma separated.
func ReadTestList(r io.Reader) (TestList, error) {
	l := TestList{Profiles: map[string]ProfileFeatures{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Split(sc.Text(), "\t")
		bad := func(why string) error { return fmt.Errorf("test list line %d: %s: %q", n, why, sc.Text()) }
		switch {
		case f[0] == "profile" && len(f) == 4:
			p := l.Profiles[f[1]]
			switch f[2] {
			case "core":
				p.Core = splitFeatures(f[3])
			case "extended":
				p.Extended = splitFeatures(f[3])
			default:
				return l, bad("want core or extended")
			}
			l.Profiles[f[1]] = p
		case f[0] == "test" && len(f) == 5:
			parallel, err1 := strconv.ParseBool(f[2])
			provisional, err2 := strconv.ParseBool(f[3])
			if err1 != nil || err2 != nil || f[1] == "" {
				return l, bad("want a name and two booleans")
			}
			l.Tests = append(l.Tests, SuiteTest{Name: f[1], Parallel: parallel, Provisional: provisional, Features: splitFeatures(f[4])})
		default:
			return l, bad("want a profile line of 4 fields or a test line of 5")
		}
	}
	if err := sc.Err(); err != nil {
		return l, err
	}
	if len(l.Tests) == 0 || len(l.Profiles) == 0 {
		return l, fmt.Errorf("test list has %d tests and %d profiles", len(l.Tests), len(l.Profiles))
	}
	return l, nil
}

func splitFeatures(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// Part is the core or the extended half of a conformance profile: what
// the suite's report counts separately.
type Part struct {
	Profile  string
	Extended bool
}

func (p Part) String() string {
	if p.Extended {
		return p.Profile + " extended"
	}
	return p.Profile + " core"
}

// PartOf returns the part of profile that test counts in, by the suite's
// own rule: a test is in a profile when each of its features is one of the
// profile's core or extended features (getConformanceProfilesForTest in
// the suite's utils/suite/profiles.go), and in its extended part when any
// is not a core feature (isTestExtended, utils/suite/reports.go). ok is
// false when the test is not in the profile, or the profile is unknown.
func (l TestList) PartOf(test SuiteTest, profile string) (part Part, ok bool) {
	p, known := l.Profiles[profile]
	if !known {
		return Part{}, false
	}
	part.Profile = profile
	for _, f := range test.Features {
		switch {
		case slices.Contains(p.Core, f):
		case slices.Contains(p.Extended, f):
			part.Extended = true
		default:
			return Part{}, false
		}
	}
	return part, true
}

// Features returns what the harness passes as -supported-features to run
// every test of profiles, sorted: the profiles' core features, and those of
// their extended features that some test of the list needs. An extended
// feature no test exercises (v1.7.0 lists ClusterTrustBundle,
// GatewayAddressRoutability and GatewayListenerFilters in its profiles
// with no test) is left out: the flag is also the report's
// supportedFeatures, and a report must not claim what no run checked.
func (l TestList) Features(profiles []string) ([]string, error) {
	tested := map[string]bool{}
	for _, t := range l.Tests {
		for _, f := range t.Features {
			tested[f] = true
		}
	}
	var out []string
	for _, name := range profiles {
		p, ok := l.Profiles[name]
		if !ok {
			return nil, fmt.Errorf("the suite has no conformance profile %q", name)
		}
		out = append(out, p.Core...)
		for _, f := range p.Extended {
			if tested[f] {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// PartResult is Go's verdicts on the tests of one part.
type PartResult struct {
	Part
	Passed, Failed, Skipped []string
	// Missing are tests of the part with no verdict line: the suite ended
	// before it printed one (a crash, a kill, a fatal setup).
	Missing []string
}

// Line is "<part>: N passed, M failed, K skipped", with the tests that
// have no verdict when there are any.
func (r PartResult) Line() string {
	s := fmt.Sprintf("%s: %d passed, %d failed, %d skipped", r.Part, len(r.Passed), len(r.Failed), len(r.Skipped))
	if len(r.Missing) > 0 {
		s += fmt.Sprintf(", %d without a verdict", len(r.Missing))
	}
	return s
}

// ByProfile sorts Go's verdicts into the core and extended part of each
// of profiles, in that order; a test in two profiles counts in each.
func (l TestList) ByProfile(v Verdicts, profiles []string) []PartResult {
	var out []PartResult
	for _, name := range profiles {
		core, ext := PartResult{Part: Part{Profile: name}}, PartResult{Part: Part{Profile: name, Extended: true}}
		for _, t := range l.Tests {
			part, ok := l.PartOf(t, name)
			if !ok {
				continue
			}
			r := &core
			if part.Extended {
				r = &ext
			}
			switch v[t.Name] {
			case "PASS":
				r.Passed = append(r.Passed, t.Name)
			case "FAIL":
				r.Failed = append(r.Failed, t.Name)
			case "SKIP":
				r.Skipped = append(r.Skipped, t.Name)
			default:
				r.Missing = append(r.Missing, t.Name)
			}
		}
		out = append(out, core, ext)
	}
	return out
}

// ReportPart is one part's figures in the suite's report.
type ReportPart struct {
	Passed, Failed, Skipped   int
	FailedTests, SkippedTests []string
}

// reportStatus is a part's status in a gateway-api ConformanceReport
// (conformance/apis/v1 profilereport.go).
type reportStatus struct {
	Statistics   statistics `json:"statistics"`
	FailedTests  []string   `json:"failedTests"`
	SkippedTests []string   `json:"skippedTests"`
}

type statistics struct {
	Passed, Failed, Skipped int
}

func (s reportStatus) part() ReportPart {
	return ReportPart{Passed: s.Statistics.Passed, Failed: s.Statistics.Failed, Skipped: s.Statistics.Skipped,
		FailedTests: s.FailedTests, SkippedTests: s.SkippedTests}
}

// ParseReportParts reads a gateway-api ConformanceReport YAML: each
// profile's core and extended figures. A part the report leaves out
// (no extended results) is absent from the map.
func ParseReportParts(data []byte) (map[Part]ReportPart, error) {
	var r struct {
		Profiles []struct {
			Name     string        `json:"name"`
			Core     reportStatus  `json:"core"`
			Extended *reportStatus `json:"extended"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	out := map[Part]ReportPart{}
	for _, p := range r.Profiles {
		out[Part{Profile: p.Name}] = p.Core.part()
		if p.Extended != nil {
			out[Part{Profile: p.Name, Extended: true}] = p.Extended.part()
		}
	}
	return out, nil
}

// CheckReport cross-checks Go's verdicts by part with the report's, and
// returns every disagreement as an error, and, as notes, where the report
// differs from Go in a way the suite v1.6.1 is known to: it records a
// test as passed whenever t.Run returned true, which a failing Parallel
// test does (it returns as soon as the test calls t.Parallel) and a test
// that skips itself does. A test Go failed that is not Parallel must be
// listed failed; every test the report lists failed or skipped must have
// that verdict from Go; the report's pass count must equal Go's passes
// plus those two known miscounts; a part with tests must be in the report.
func CheckReport(results []PartResult, list TestList, report map[Part]ReportPart) (notes []string, err error) {
	parallel := map[string]bool{}
	for _, t := range list.Tests {
		parallel[t.Name] = t.Parallel
	}
	var problems []string
	for _, r := range results {
		rp, ok := report[r.Part]
		total := len(r.Passed) + len(r.Failed) + len(r.Skipped) + len(r.Missing)
		if !ok {
			if total > 0 {
				problems = append(problems, fmt.Sprintf("%s: %d tests, not in the report", r.Part, total))
			}
			continue
		}
		if len(r.Missing) > 0 {
			problems = append(problems, fmt.Sprintf("%s: no verdict from Go for %s", r.Part, strings.Join(r.Missing, ", ")))
		}
		for _, name := range rp.FailedTests {
			if !slices.Contains(r.Failed, name) {
				problems = append(problems, fmt.Sprintf("%s: the report lists %s failed, Go did not fail it", r.Part, name))
			}
		}
		for _, name := range rp.SkippedTests {
			if !slices.Contains(r.Skipped, name) {
				problems = append(problems, fmt.Sprintf("%s: the report lists %s skipped, Go did not skip it", r.Part, name))
			}
		}
		var failedAsPassed, skippedAsPassed []string
		for _, name := range r.Failed {
			switch {
			case slices.Contains(rp.FailedTests, name):
			case parallel[name]:
				failedAsPassed = append(failedAsPassed, name)
			default:
				problems = append(problems, fmt.Sprintf("%s: Go failed %s, the report does not list it failed", r.Part, name))
			}
		}
		for _, name := range r.Skipped {
			if !slices.Contains(rp.SkippedTests, name) {
				skippedAsPassed = append(skippedAsPassed, name)
			}
		}
		if want := len(r.Passed) + len(failedAsPassed) + len(skippedAsPassed); rp.Passed != want {
			problems = append(problems, fmt.Sprintf("%s: the report counts %d passed, Go's verdicts give %d", r.Part, rp.Passed, want))
		}
		if rp.Failed != len(rp.FailedTests) || rp.Skipped != len(rp.SkippedTests) {
			problems = append(problems, fmt.Sprintf("%s: the report's counts (%d failed, %d skipped) differ from its lists (%d, %d)",
				r.Part, rp.Failed, rp.Skipped, len(rp.FailedTests), len(rp.SkippedTests)))
		}
		if len(failedAsPassed) > 0 {
			notes = append(notes, fmt.Sprintf("%s: the report counts %d Parallel tests Go failed as passed (the suite v1.6.1's defect): %s",
				r.Part, len(failedAsPassed), strings.Join(failedAsPassed, ", ")))
		}
		if len(skippedAsPassed) > 0 {
			notes = append(notes, fmt.Sprintf("%s: the report counts %d tests that skipped themselves as passed: %s",
				r.Part, len(skippedAsPassed), strings.Join(skippedAsPassed, ", ")))
		}
	}
	if len(problems) > 0 {
		return notes, fmt.Errorf("the suite's report disagrees with Go's verdicts: %s", strings.Join(problems, "; "))
	}
	return notes, nil
}
