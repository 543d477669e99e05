// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/http"
	"strings"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// Which OkHttpResponse header outcomes the stand-in applies, and which it
// refuses because Envoy releases disagree (applyAuthzMutations).
func TestExtAuthzHeaderOptionsAcrossReleases(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    authzMutation
		ok   bool
		want string
	}{
		{"set present", authzMutation{"x-have", "2", opSet}, true, "2"},
		{"set absent", authzMutation{"x-new", "2", opSet}, true, "2"},
		{"append present", authzMutation{"x-have", "2", opAppendIfExists}, true, "1,2"},
		{"append absent: release-dependent", authzMutation{"x-new", "2", opAppendIfExists}, false, ""},
		{"default action absent", authzMutation{"x-new", "2", opVersionDependent}, true, "2"},
		{"default action present: release-dependent", authzMutation{"x-have", "2", opVersionDependent}, false, ""},
		{"overwrite-if-exists absent: release-dependent", authzMutation{"x-new", "2", opOverwriteIfExists}, false, ""},
		{"x-envoy ignored", authzMutation{"x-envoy-thing", "2", opSet}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &extproc.Request{Headers: http.Header{"X-Have": {"1"}}}
			out, ok := applyAuthzMutations(&extAuthzConfig{rules: &extAuthzMutationRules{disallowSystem: true}}, r, authzResult{mutations: []authzMutation{tc.m}})
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && strings.Join(out.Headers.Values(tc.m.key), ",") != tc.want {
				t.Fatalf("%s = %q, want %q", tc.m.key, out.Headers.Values(tc.m.key), tc.want)
			}
		})
	}
}
