// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
)

func TestEscapeCell(t *testing.T) {
	for in, want := range map[string]string{
		"router~10.0.0.1~gw.ns":      "router~10.0.0.1~gw.ns",
		"héllo wörld ✓ 名前":           "héllo wörld ✓ 名前",
		"a\nb\tc\r":                  `a\nb\tc\r`,
		"\x1b[31mred\x1b[0m":         `\x1b[31mred\x1b[0m`,
		"\x1b]0;title\a":             `\x1b]0;title\a`,
		"abc\u202egnp.exe":           `abc\u202egnp.exe`,
		"bad \xff utf8":              `bad \xff utf8`,
		"nul\x00 del\x7f c1\u0085 x": `nul\x00 del\x7f c1\u0085 x`,
	} {
		if got := escapeCell(in); got != want {
			t.Errorf("escapeCell(%q) = %q, want %q", in, got, want)
		}
	}
}

// controlBytes lists the control bytes of out other than the newline that
// ends each line.
func controlBytes(out string) []byte {
	var bad []byte
	for _, b := range []byte(out) {
		if (b < 0x20 && b != '\n') || b == 0x7f {
			bad = append(bad, b)
		}
	}
	return bad
}

// TestProxyStatusEscapesProxyText: node ids, Gateway names and NACK
// messages come from proxies; none of their control characters reach the
// terminal, and none splits a row.
func TestProxyStatusEscapesProxyText(t *testing.T) {
	st := []xds.ProxyStatus{{
		Stream: 1, Node: "evil\n\x1b[2Jnode", Gateway: "ns/gw\tFAKE",
		Types: map[string]*xds.TypeStatus{"cds": {Sent: "v1", Nacked: "v1",
			NackMessage: "line one\r\nFAKE NACK LINE \x1b]0;pwned\a\x1b[31m"}},
	}}
	body, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	defer srv.Close()
	out, err := run(t, defaultDeps(), "proxy-status", "--debug-address", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if bad := controlBytes(out); len(bad) > 0 {
		t.Errorf("proxy-status printed control bytes %q:\n%s", bad, out)
	}
	// Header, one row, a blank line, "NACKs:", one NACK line.
	if n := strings.Count(out, "\n"); n != 5 {
		t.Errorf("proxy-status printed %d lines, want 5:\n%s", n, out)
	}
	for _, want := range []string{`evil\n\x1b[2Jnode`, `ns/gw\tFAKE`, `line one\r\nFAKE NACK LINE \x1b]0;pwned\a\x1b[31m`} {
		if !strings.Contains(out, want) {
			t.Errorf("proxy-status lacks the escaped %s:\n%s", want, out)
		}
	}
}

// TestRoutesTableEscapes: a route table cell with a newline or ESC (a
// regex, a name) stays one escaped cell of one row.
func TestRoutesTableEscapes(t *testing.T) {
	rc := &routev3.RouteConfiguration{Name: "http.80", VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"a.example"},
		Routes: []*routev3.Route{{
			Name: "ns.route\x1b[8m.0",
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{
				SafeRegex: &matcherv3.RegexMatcher{Regex: "/a\n/b"}}},
		}},
	}}}
	var b bytes.Buffer
	if err := writeRoutes(&b, []*routev3.RouteConfiguration{rc}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if bad := controlBytes(out); len(bad) > 0 || strings.Count(out, "\n") != 2 {
		t.Errorf("routes table: control bytes %q, %d lines, want none and 2:\n%s", bad, strings.Count(out, "\n"), out)
	}
	if !strings.Contains(out, `regex /a\n/b`) || !strings.Contains(out, `ns.route\x1b[8m.0`) {
		t.Errorf("routes table lacks the escaped cells:\n%s", out)
	}
}

// TestProxyStatusTellsStreamsApart: two streams with one node id are two
// rows that differ (the PEER column: remote address and stream id).
func TestProxyStatusTellsStreamsApart(t *testing.T) {
	e := startXDS(t)
	node := proxyNode(gatewayRef{"gateway-namespace", "gateway"})
	node.Id = "same-id"
	for range 2 {
		s := adsclient.NewSotW(t, adsclient.Dial(t, e.ads), node, adsclient.Within(10*time.Second))
		if err := s.Request(resourcev3.ClusterType); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var rows []string
	out := proxyStatusWhen(t, e.http.URL, "proxy-status showing both streams", func(out string) bool {
		rows = nil
		for l := range strings.Lines(out) {
			if strings.HasPrefix(l, "same-id ") {
				rows = append(rows, l)
			}
		}
		return len(rows) == 2
	})
	if rows[0] == rows[1] {
		t.Errorf("two streams of node same-id print the same row:\n%s", out)
	}
}

// runSplit executes the command tree with args and returns stdout, stderr
// and the error.
func runSplit(t *testing.T, d deps, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommandWith(d)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// TestManifestNamesEscaped: file and object names from manifests reach
// the terminal escaped, whichever command prints them: status -f and
// proxy-config -f (their rejected-manifest lines on stderr), check, and
// main's error line.
func TestManifestNamesEscaped(t *testing.T) {
	dir := copySeed(t)
	evil := "bad\x1b[31m\r\nFAKE.yaml"
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"x\\e[2J\\r\\nrejected   forged\"\n  namespace: llm-namespace\n"
	if err := os.WriteFile(filepath.Join(dir, evil), []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	d := fakeDeps(t, inference...)
	for _, args := range [][]string{
		{"status", "-f", dir},
		{"proxy-config", "listeners", "--gateway", seedGateway, "-f", dir},
		{"check", "-f", dir},
	} {
		t.Run(args[0], func(t *testing.T) {
			out, stderr, err := runSplit(t, d, args...)
			if err == nil {
				t.Fatalf("no error: the rejected ConfigMap is not reported")
			}
			all := out + stderr + errorText(err)
			if bad := controlBytes(all); len(bad) > 0 {
				t.Errorf("control bytes %q reach the terminal:\n%s", bad, all)
			}
			for _, want := range []string{`bad\x1b[31m\r\nFAKE.yaml`, `x\x1b[2J\r\nrejected   forged`} {
				if !strings.Contains(out+stderr, want) {
					t.Errorf("output lacks the escaped name %q:\nstdout:\n%s\nstderr:\n%s", want, out, stderr)
				}
			}
		})
	}
	// An error quoting a path (here, one that does not exist) is escaped
	// too, and a hint keeps its own line.
	_, _, err := runSplit(t, d, "status", "-f", filepath.Join(dir, "gone\x1b]0;title\a.yaml"))
	if err == nil {
		t.Fatal("no error for a missing path")
	}
	if txt := errorText(err); len(controlBytes(txt)) > 0 || !strings.Contains(txt, `gone\x1b]0;title\a.yaml`) {
		t.Errorf("errorText = %q", txt)
	}
	hinted := withHint(errors.New("dial \x1b[2Jx"), "try \r--plaintext")
	if got, want := errorText(hinted), "dial \\x1b[2Jx\nhint: try \\r--plaintext"; got != want {
		t.Errorf("errorText(hinted) = %q, want %q", got, want)
	}
}
