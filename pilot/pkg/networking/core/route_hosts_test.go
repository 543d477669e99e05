// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"testing"
)

func TestRouteHostnames(t *testing.T) {
	for _, tc := range []struct {
		listener string
		route    []string
		want     string
	}{
		{"", nil, "[*]"},
		{"a.example.com", nil, "[a.example.com]"},
		{"", []string{"b.com", "a.com", "a.com"}, "[a.com b.com]"},
		{"a.example.com", []string{"a.example.com", "b.example.com"}, "[a.example.com]"},
		{"*.example.com", []string{"a.example.com", "example.com", "x.a.example.com"}, "[a.example.com x.a.example.com]"},
		{"a.example.com", []string{"*.example.com"}, "[a.example.com]"},
		{"*.example.com", []string{"*.a.example.com", "*.other.com"}, "[*.a.example.com]"},
		{"*.a.example.com", []string{"*.example.com"}, "[*.a.example.com]"},
		{"a.example.com", []string{"b.example.com"}, "[]"},
	} {
		if got := fmt.Sprint(routeHostnames(tc.listener, tc.route)); got != tc.want {
			t.Errorf("routeHostnames(%q, %v) = %s, want %s", tc.listener, tc.route, got, tc.want)
		}
	}
}
