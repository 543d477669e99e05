// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import "testing"

func TestExpandFollowsTheKubelet(t *testing.T) {
	vars := lookupIn(map[string]string{"A": "1", "B": "two"}, map[string]string{"B": "shadowed", "S": "svc"})
	for in, want := range map[string]string{
		"$(A)-$(B)-$(S)": "1-two-svc",
		"$(MISSING)":     "$(MISSING)",
		"$$(A)":          "$(A)",
		"$$":             "$",
		"cost $5":        "cost $5",
		"open $(A":       "open $(A",
		"trailing $":     "trailing $",
		"":               "",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
