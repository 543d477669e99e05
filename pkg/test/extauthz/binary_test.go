// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extauthz

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == BinariesEnv {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name, dir string
	}{{"unset", ""}, {"no binary", dir}} {
		_, err := findBinary(env(tc.dir))
		if !errors.Is(err, errNoBinary) || !strings.Contains(err.Error(), "hack/extauthz-binary.sh") {
			t.Errorf("%s: error %v, want one naming hack/extauthz-binary.sh", tc.name, err)
		}
	}
	p := filepath.Join(dir, binaryName)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findBinary(env(dir)); !errors.Is(err, errNoBinary) {
		t.Errorf("a file without the executable bit: error %v, want errNoBinary", err)
	}
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findBinary(env(dir)); err != nil || got != p {
		t.Errorf("findBinary = %q, %v; want %q", got, err, p)
	}
}

// The server's log, written in pieces that split lines, counted by API and
// verdict; a marker inside a logged request (a header value) is no decision.
func TestDecisionsFromLog(t *testing.T) {
	o := &output{}
	log := "2026/12/07 21:00:00 Starting gRPC server at [::]:9191\n" +
		"2026/12/07 21:00:01 [gRPCv3][denied]: llm.example/v1/completions, attributes: request:{http:{headers:{key:\"x\" value:\"[HTTP][allowed]\"}}}\n" +
		"2026/12/07 21:00:01 [gRPCv3][allowed]: llm.example/v1/completions, attributes: {}\n" +
		"2026/12/07 21:00:02 [gRPCv2][allowed]: llm.example/, attributes: {}\n" +
		"2026/12/07 21:00:03 [HTTP][denied]: POST llm.example/check/v1/completions, headers: map[], body: []\n" +
		"2026/12/07 21:00:04 [HTTP][allowed]: POST llm.example/check/v1/completions, headers: map[X-Ext-Authz:[allow]], body: []\n" +
		"2026/12/07 21:00:05 [HTTP][allowed]: unfinished line"
	for i := 0; i < len(log); i += 7 {
		if _, err := o.Write([]byte(log[i:min(i+7, len(log))])); err != nil {
			t.Fatal(err)
		}
	}
	want := Decisions{GRPCAllowed: 2, GRPCDenied: 1, HTTPAllowed: 1, HTTPDenied: 1}
	if got := o.decisions(); got != want {
		t.Errorf("decisions %+v, want %+v", got, want)
	}
	if got := want.Sub(Decisions{GRPCAllowed: 1}); got.Total() != 4 || got.GRPCAllowed != 1 {
		t.Errorf("Sub: %+v", got)
	}
	if !strings.Contains(o.String(), "unfinished line") {
		t.Error("the log kept lacks the last, unfinished line")
	}
}
