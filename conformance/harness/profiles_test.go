// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"slices"
	"strings"
	"testing"
)

// testList is a small list in testlist's format: two profiles sharing the
// Gateway feature, a Gateway-only test in both cores, an HTTP core test,
// an HTTP extended Parallel test, a GRPC test and a TLS test in neither;
// the HTTP extended feature GatewayListenerFilters has no test.
const testList = "profile\tGATEWAY-HTTP\tcore\tGateway,HTTPRoute\n" +
	"profile\tGATEWAY-HTTP\textended\tHTTPRouteRetry,HTTPRouteCORS,GatewayListenerFilters\n" +
	"profile\tGATEWAY-GRPC\tcore\tGRPCRoute,Gateway\n" +
	"profile\tGATEWAY-GRPC\textended\t\n" +
	"test\tGatewayObservedGenerationBump\ttrue\tfalse\tGateway\n" +
	"test\tHTTPRouteSimpleSameNamespace\tfalse\tfalse\tGateway,HTTPRoute\n" +
	"test\tHTTPRouteRetry\ttrue\tfalse\tGateway,HTTPRoute,HTTPRouteRetry\n" +
	"test\tHTTPRouteCORS\tfalse\ttrue\tGateway,HTTPRoute,HTTPRouteCORS\n" +
	"test\tGRPCExactMethodMatching\tfalse\tfalse\tGRPCRoute,Gateway\n" +
	"test\tTLSRouteSimple\tfalse\tfalse\tGateway,TLSRoute\n"

func readTestList(t *testing.T) TestList {
	t.Helper()
	l, err := ReadTestList(strings.NewReader(testList))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var profiles = []string{"GATEWAY-HTTP", "GATEWAY-GRPC"}

func TestPartOfFollowsTheSuitesRule(t *testing.T) {
	l := readTestList(t)
	for _, tc := range []struct {
		test, profile string
		want          string // "" when not in the profile
	}{
		{"GatewayObservedGenerationBump", "GATEWAY-HTTP", "GATEWAY-HTTP core"},
		{"GatewayObservedGenerationBump", "GATEWAY-GRPC", "GATEWAY-GRPC core"},
		{"HTTPRouteRetry", "GATEWAY-HTTP", "GATEWAY-HTTP extended"},
		{"HTTPRouteRetry", "GATEWAY-GRPC", ""},
		{"TLSRouteSimple", "GATEWAY-HTTP", ""},
		{"HTTPRouteSimpleSameNamespace", "GATEWAY-TLS", ""},
	} {
		i := slices.IndexFunc(l.Tests, func(s SuiteTest) bool { return s.Name == tc.test })
		part, ok := l.PartOf(l.Tests[i], tc.profile)
		got := ""
		if ok {
			got = part.String()
		}
		if got != tc.want {
			t.Errorf("%s in %s: %q, want %q", tc.test, tc.profile, got, tc.want)
		}
	}
	f, err := l.Features(profiles)
	if err != nil {
		t.Fatal(err)
	}
	// GatewayListenerFilters is an extended feature of GATEWAY-HTTP that
	// no test needs: not claimed.
	if want := []string{"GRPCRoute", "Gateway", "HTTPRoute", "HTTPRouteCORS", "HTTPRouteRetry"}; !slices.Equal(f, want) {
		t.Errorf("features %v, want %v", f, want)
	}
	if _, err := l.Features([]string{"MESH-HTTP"}); err == nil {
		t.Error("an unknown profile gave features")
	}
}

func TestReadTestListRefusesBadLines(t *testing.T) {
	for _, bad := range []string{
		"profile\tGATEWAY-HTTP\tcore\n",
		"test\tX\tyes\tfalse\tGateway\n",
		"profile\tGATEWAY-HTTP\tmiddle\tGateway\ntest\tX\tfalse\tfalse\tGateway\n",
		"profile\tGATEWAY-HTTP\tcore\tGateway\n",
	} {
		if _, err := ReadTestList(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// gwapiOutput: the Parallel HTTPRouteRetry fails, the serial CORS test
// passes, GRPCExactMethodMatching is skipped by -skip-tests, and
// HTTPRouteSimpleSameNamespace fails; TLSRouteSimple skips (unsupported).
const gwapiOutput = `=== RUN   TestConformance
    --- FAIL: TestConformance/HTTPRouteSimpleSameNamespace (30.00s)
    --- PASS: TestConformance/HTTPRouteCORS (3.00s)
    --- SKIP: TestConformance/GRPCExactMethodMatching (0.00s)
    --- SKIP: TestConformance/TLSRouteSimple (0.00s)
    --- PASS: TestConformance/GatewayObservedGenerationBump (1.00s)
    --- FAIL: TestConformance/HTTPRouteRetry (60.00s)
--- FAIL: TestConformance (100.00s)
`

// gwapiReport is what the suite v1.6.1 writes for that run: the failing
// Parallel HTTPRouteRetry counted passed.
const gwapiReport = `apiVersion: gateway.networking.k8s.io/v1
kind: ConformanceReport
profiles:
- name: GATEWAY-GRPC
  core:
    result: partial
    statistics: {Failed: 0, Passed: 1, Skipped: 1}
    skippedTests: [GRPCExactMethodMatching]
- name: GATEWAY-HTTP
  core:
    result: failure
    statistics: {Failed: 1, Passed: 1, Skipped: 0}
    failedTests: [HTTPRouteSimpleSameNamespace]
  extended:
    result: success
    statistics: {Failed: 0, Passed: 2, Skipped: 0}
`

func TestByProfileAndCheckReport(t *testing.T) {
	l := readTestList(t)
	v, err := ParseVerdicts(strings.NewReader(gwapiOutput))
	if err != nil {
		t.Fatal(err)
	}
	results := l.ByProfile(v, profiles)
	var lines []string
	for _, r := range results {
		lines = append(lines, r.Line())
	}
	want := []string{
		"GATEWAY-HTTP core: 1 passed, 1 failed, 0 skipped",
		"GATEWAY-HTTP extended: 1 passed, 1 failed, 0 skipped",
		"GATEWAY-GRPC core: 1 passed, 0 failed, 1 skipped",
		"GATEWAY-GRPC extended: 0 passed, 0 failed, 0 skipped",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("lines\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	report, err := ParseReportParts([]byte(gwapiReport))
	if err != nil {
		t.Fatal(err)
	}
	notes, err := CheckReport(results, l, report)
	if err != nil {
		t.Fatalf("agreeing report refused: %v", err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "HTTPRouteRetry") {
		t.Errorf("notes %q: want one naming the Parallel HTTPRouteRetry", notes)
	}

	// Disagreements: a serial failure counted passed, a pass listed
	// failed, a part missing from the report.
	for name, mutate := range map[string]func(map[Part]ReportPart){
		"serial failure counted passed": func(m map[Part]ReportPart) {
			m[Part{Profile: "GATEWAY-HTTP"}] = ReportPart{Passed: 2}
		},
		"pass listed failed": func(m map[Part]ReportPart) {
			m[Part{Profile: "GATEWAY-GRPC"}] = ReportPart{Failed: 1, Skipped: 1, FailedTests: []string{"GatewayObservedGenerationBump"},
				SkippedTests: []string{"GRPCExactMethodMatching"}}
		},
		"part missing": func(m map[Part]ReportPart) { delete(m, Part{Profile: "GATEWAY-HTTP", Extended: true}) },
	} {
		r, _ := ParseReportParts([]byte(gwapiReport))
		mutate(r)
		if _, err := CheckReport(results, l, r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	// A test without a verdict (the suite died) is counted and refused.
	delete(v, "HTTPRouteCORS")
	results = l.ByProfile(v, profiles)
	if got := results[1].Line(); got != "GATEWAY-HTTP extended: 0 passed, 1 failed, 0 skipped, 1 without a verdict" {
		t.Errorf("line %q", got)
	}
	if _, err := CheckReport(results, l, report); err == nil || !strings.Contains(err.Error(), "HTTPRouteCORS") {
		t.Errorf("missing verdict: %v", err)
	}
}
