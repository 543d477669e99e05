// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import "testing"

func TestHostnamesIntersect(t *testing.T) {
	cases := []struct {
		listener string
		route    []string
		want     bool
	}{
		{"", nil, true},
		{"", []string{"foo.example.com"}, true},
		{"foo.example.com", nil, true},
		{"foo.example.com", []string{"foo.example.com"}, true},
		{"foo.example.com", []string{"FOO.example.com"}, true},
		{"foo.example.com", []string{"bar.example.com"}, false},
		{"*.example.com", []string{"foo.example.com"}, true},
		{"*.example.com", []string{"foo.bar.example.com"}, true},
		{"*.example.com", []string{"example.com"}, false},
		{"*.example.com", []string{"fooexample.com"}, false},
		{"*.example.com", []string{"other.org", "a.example.com"}, true},
		{"foo.example.com", []string{"*.example.com"}, true},
		{"example.com", []string{"*.example.com"}, false},
		{"*.example.com", []string{"*.example.com"}, true},
		{"*.example.com", []string{"*.foo.example.com"}, true},
		{"*.foo.example.com", []string{"*.example.com"}, true},
		{"*.example.com", []string{"*.example.org"}, false},
		{"*.bar.com", []string{"*.foobar.com"}, false},
	}
	for _, tc := range cases {
		if got := HostnamesIntersect(tc.listener, tc.route); got != tc.want {
			t.Errorf("HostnamesIntersect(%q, %q) = %v, want %v", tc.listener, tc.route, got, tc.want)
		}
	}
}
