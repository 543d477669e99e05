// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package re2size

import (
	"errors"
	"strings"
	"testing"
)

// figure is RE2's ProgramSize() for a pattern. Sources:
//   - "compile_test": re2/testing/compile_test.cc in google/re2 (the
//     flattened program dumps of TestRegexpCompileToProg and
//     TestCompile.Bug26705922; the size is the last instruction's index
//     plus one). Those tests parse with Latin-1, which for ASCII patterns
//     without '.' or negated classes gives the UTF-8 program.
//   - "envoy error": the figure of an Envoy NACK message quoted in a
//     public page ("RE2 program size of 106 > max program size of 100 set
//     for the error level threshold").
//   - "libre2 2022-06-01": measured with RE2 2022-06-01 (Debian bookworm's
//     libre2-9), RE2(pattern, RE2::Quiet).ProgramSize(), the call and
//     options Envoy's CompiledGoogleReMatcher uses.
type figure struct {
	re     string
	size   int
	source string
	// exact: Model gives exactly size; otherwise Model may be lower or
	// higher and only ProgramSize's bound is pinned.
	exact bool
}

var figures = []figure{
	{"a", 5, "compile_test", true},
	{"ab", 6, "compile_test", true},
	{"a|c", 6, "compile_test", true},
	{"a|b", 5, "compile_test", true},
	{"[ab]", 5, "compile_test", true},
	{"a+", 6, "compile_test", true},
	{"a+?", 6, "compile_test", true},
	{"a*", 5, "compile_test", true},
	{"a*?", 5, "compile_test", true},
	{"a?", 6, "compile_test", true},
	{"a??", 6, "compile_test", true},
	{"a{4}", 8, "compile_test", true},
	{"(a)", 7, "compile_test", true},
	{"(?:a)", 5, "compile_test", true},
	{"", 4, "compile_test", true},
	{"[[-`]", 5, "compile_test", true},
	{"(?:|a)*", 10, "compile_test", true},
	{"(?:|a)+", 7, "compile_test", true},
	{`[\x{80}-\x{10FFFF}]`, 10, "compile_test", true},
	{`[\x{10000}\x{10010}]`, 9, "compile_test", false},
	{`[\x{8000}-\x{10FFF}]`, 9, "compile_test", false},
	{`^/user/(488/sms|h5/getJwt|captcha|version/getAIDrawTemplate|version/isMainLand|version/promotionTemplate|version/activityTemplate2).*`, 106, "envoy error", true},
	{".", 12, "libre2 2022-06-01", true},
	{"[^ab]", 12, "libre2 2022-06-01", true},
	{"/asdf/.*", 18, "libre2 2022-06-01", true},
	{"^/v1/.*", 12, "libre2 2022-06-01", true},
	{"^/api/v[0-9]+/models/[^/]+/generate$", 32, "libre2 2022-06-01", true},
	{"Bearer [A-Za-z0-9._-]+", 16, "libre2 2022-06-01", false},
	{"(?i)^gpt-4o(-mini)?$", 12, "libre2 2022-06-01", true},
	{"/foo.Bar/(Get|List)Model", 34, "libre2 2022-06-01", true},
	{"(?P<n>a)", 7, "libre2 2022-06-01", true},
	{`\Q\pL\E`, 7, "libre2 2022-06-01", true},
	{"(?i)k", 8, "libre2 2022-06-01", false},
	{"^/v1/models/[a-z0-9-]{1,64}$", 259, "libre2 2022-06-01", false},
	// Go's parser factors these differently from RE2's, so Model is
	// lower than RE2; the margin of ProgramSize covers them.
	{"(?:k|k|.)", 14, "libre2 2022-06-01", false},
	{`^^(?:k|k|.|[0-9])$\z`, 14, "libre2 2022-06-01", false},
	{"[^/]|[^/]|s|é", 16, "libre2 2022-06-01", false},
	{"(?:(?:(?:(?s:.)?){0,2}){0,2}){3,}", 112, "libre2 2022-06-01", false},
}

func TestModelAgainstRE2Figures(t *testing.T) {
	for _, f := range figures {
		n, err := Model(f.re)
		if err != nil {
			t.Errorf("Model(%q): %v", f.re, err)
			continue
		}
		if f.exact && n != f.size {
			t.Errorf("Model(%q) = %d, RE2 (%s) = %d", f.re, n, f.source, f.size)
		}
	}
}

func TestProgramSizeNeverBelowRE2Figures(t *testing.T) {
	lower := 0
	for _, f := range figures {
		n, err := ProgramSize(f.re)
		if err != nil {
			t.Errorf("ProgramSize(%q): %v", f.re, err)
			continue
		}
		if n < f.size {
			t.Errorf("ProgramSize(%q) = %d, below RE2's %d (%s)", f.re, n, f.size, f.source)
		}
		if m, _ := Model(f.re); m < f.size {
			lower++
		}
	}
	// The figures include patterns where Go's factoring makes the model
	// lower; if none were lower, the margin would be untested.
	if lower == 0 {
		t.Error("no figure exercises the margin")
	}
}

func TestRefusedAsRE2Does(t *testing.T) {
	for _, re := range []string{
		"(a{10}){101}", // RE2: invalid repetition size
		"x{1001}",
		"a**", // RE2 (Perl mode): bad repetition operator
		`\C`,
		"(?=a)",
		"(",
		"[a",
		`a\`,
		"\xff",
	} {
		if _, err := ProgramSize(re); err == nil {
			t.Errorf("ProgramSize(%q) accepted a pattern RE2 refuses", re)
		}
	}
}

func TestRefusedBeyondGo(t *testing.T) {
	cases := []struct {
		re   string
		want error
	}{
		{"(?<n>a)", ErrAngleName}, // refused by RE2 2022-06-01: "invalid perl operator: (?<"
		{`\pL`, ErrUnicodeClass},
		{`[\p{Greek}x]`, ErrUnicodeClass},
		{`\PN+`, ErrUnicodeClass},
	}
	for _, c := range cases {
		if _, err := ProgramSize(c.re); !errors.Is(err, c.want) {
			t.Errorf("ProgramSize(%q) = %v, want %v", c.re, err, c.want)
		}
	}
	for _, re := range []string{`\Q\pL(?<\E`, `[(?<]`, `\\p`, `(?P<n>a)`, `(?:a)`} {
		if _, err := ProgramSize(re); err != nil {
			t.Errorf("ProgramSize(%q): %v", re, err)
		}
	}
}

func TestCheckUsesEnvoysMessage(t *testing.T) {
	re := "^/v1/models/[a-z0-9-]{1,64}$"
	err := Check(re, EnvoyDefaultMax)
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("Check(%q, 100) = %v, want a TooLargeError", re, err)
	}
	want := "regex '" + re + "' RE2 program size of "
	if !strings.HasPrefix(err.Error(), want) ||
		!strings.HasSuffix(err.Error(), " > max program size of 100 set for the error level threshold. Increase configured max program size if necessary.") {
		t.Errorf("message = %q", err)
	}
	if err := Check(re, 32768); err != nil {
		t.Errorf("Check(%q, 32768) = %v", re, err)
	}
	if err := Check("/v1/.*", EnvoyDefaultMax); err != nil {
		t.Errorf("Check(/v1/.*, 100) = %v", err)
	}
}
