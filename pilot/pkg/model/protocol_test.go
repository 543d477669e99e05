// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package model

import "testing"

// A Service port declares a protocol by any appProtocol, or by a name of
// Istio's convention (<protocol> or <protocol>-<suffix>, case ignored);
// any other name, or none, declares nothing. HTTP/2 is declared by the
// h2c/grpc/http2 appProtocols or grpc/http2 names only.
func TestServicePortProtocol(t *testing.T) {
	for _, c := range []struct {
		name, appProtocol string
		declares, http2   bool
	}{
		{"", "", false, false},
		{"btls", "", false, false},
		{"web", "", false, false},
		{"httpx", "", false, false}, // not <protocol>-...
		{"http", "", true, false},
		{"HTTP-api", "", true, false},
		{"https", "", true, false},
		{"tcp-db", "", true, false},
		{"tls", "", true, false},
		{"grpc", "", true, true},
		{"grpc-web", "", true, true},
		{"http2-x", "", true, true},
		{"btls", "http", true, false},
		{"btls", "kubernetes.io/h2c", true, true},
		{"btls", "example.com/custom", true, false},
		{"grpc", "http", true, false}, // appProtocol wins over the name
	} {
		if got := ServicePortDeclaresProtocol(c.name, c.appProtocol); got != c.declares {
			t.Errorf("ServicePortDeclaresProtocol(%q, %q) = %v, want %v", c.name, c.appProtocol, got, c.declares)
		}
		if got := ServicePortHTTP2(c.name, c.appProtocol); got != c.http2 {
			t.Errorf("ServicePortHTTP2(%q, %q) = %v, want %v", c.name, c.appProtocol, got, c.http2)
		}
	}
}
