// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tenantRoutes is namespace ns with a Service and HTTPRoutes on the
// seed's Gateway, route name i with regexes[i] path regexes.
func tenantRoutes(ns string, regexes ...int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n---\napiVersion: v1\nkind: Service\n"+
		"metadata:\n  name: backend\n  namespace: %[1]s\nspec:\n  ports:\n  - port: 8000\n", ns)
	for i, n := range regexes {
		fmt.Fprintf(&b, "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r%d\n  namespace: %s\n"+
			"spec:\n  parentRefs:\n  - name: gateway\n    namespace: gateway-namespace\n  hostnames:\n  - r%d.%s.example.com\n  rules:\n  - matches:\n",
			i+1, ns, i+1, ns)
		for j := range n {
			fmt.Fprintf(&b, "    - path:\n        type: RegularExpression\n        value: /m%d/.*\n", j)
		}
		b.WriteString("    backendRefs:\n    - name: backend\n      port: 8000\n")
	}
	return b.String()
}

// A namespace past PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE: check exits 1
// naming its newest route (Accepted=False, TooManyMatches, the limit and
// the flag in the message), and nothing of the other namespace's, which
// status -f shows accepted.
func TestCheckReportsTenantLimits(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tenants.yaml"),
		[]byte(tenantRoutes("team-a", 2, 1)+"---\n"+tenantRoutes("team-b", 2)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := newRootCommandWith(fakeDeps(t, append(inference, "PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE", "2")...))
		cmd.SetOut(&out)
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run("check", "--timeout", "60s", "-f", seedDir, "-f", dir)
	if err == nil {
		t.Fatalf("check passed a namespace over its limit:\n%s", out)
	}
	for _, want := range []string{
		"HTTPRoute team-a/r2 (parent Gateway gateway-namespace/gateway): Accepted=False (TooManyMatches)",
		"at most 2 regular-expression matches (PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE)",
		"newest routes are refused first",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check's output lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"team-a/r1", "team-b"} {
		if strings.Contains(out, not) {
			t.Errorf("check's output names %s, which is within its limit:\n%s", not, out)
		}
	}
	status, err := run("status", "-f", seedDir, "-f", dir)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, status)
	}
	if !strings.Contains(status, "reason: TooManyMatches") {
		t.Errorf("status -f shows no TooManyMatches:\n%s", status)
	}
}
