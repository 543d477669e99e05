// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"testing"
)

// TestHTTPTransportHintADSPort: proxy-status given the ADS port fails in one
// of two ways, depending on whether the gRPC server's SETTINGS frame arrives
// before or after the request is written (net/http's messages, Go 1.26);
// both get the hint.
func TestHTTPTransportHintADSPort(t *testing.T) {
	for _, msg := range []string{
		`Get "http://127.0.0.1:15010/debug/syncz": net/http: HTTP/1.x transport connection broken: malformed HTTP response "\x00\x00\x06\x04"`,
		`Get "http://127.0.0.1:15010/debug/syncz": readLoopPeekFailLocked: %!w(<nil>)`,
	} {
		err := httpTransportHint(errors.New(msg), "127.0.0.1:15010")
		wantErr(t, err, msg, "hint: 127.0.0.1:15010 answers in HTTP/2 frames: it looks like the ADS (gRPC) port")
	}
}
