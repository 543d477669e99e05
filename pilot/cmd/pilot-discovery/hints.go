// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The CLI's errors name the likely fix when the cause is a common mistake:
// a transport that does not match the server's (TLS against plaintext and
// the other way round), a port of another kind (ADS, monitoring or debug),
// or a deadline too short for a large configuration. The raw error is kept
// first, the hint follows on its own line.

// Default ports, as discovery serves them.
const (
	defaultADSPort   = "15010"
	defaultHTTPPort  = "15014"
	defaultDebugPort = "15015"
)

// hintError is an error with the likely fix on its own line.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + "\nhint: " + e.hint }
func (e *hintError) Unwrap() error { return e.err }

// withHint appends hint to err's text, keeping err in the chain.
func withHint(err error, hint string) error { return &hintError{err: err, hint: hint} }

// withTimeoutHint suggests a larger --timeout when err is a deadline: the
// context's, or gRPC's DeadlineExceeded status, which does not wrap it (a
// server that accepts the connection and never answers).
func withTimeoutHint(err error, timeout time.Duration) error {
	if err == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errNoConfig) ||
		status.Code(err) == codes.DeadlineExceeded) {
		return err
	}
	return withHint(err, fmt.Sprintf("gave up after --timeout %s; a large configuration (thousands of routes) takes longer "+
		"to compute and send: try --timeout %s", timeout, 4*timeout))
}

// adsTransportHint names the fix for an ADS connection error of a client
// that used plaintext (or TLS when plaintext is false) against address.
func adsTransportHint(err error, address string, plaintext bool) error {
	msg := err.Error()
	_, port, _ := strings.Cut(address, ":")
	switch {
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		hint := "the server at " + address + " does not speak TLS: if it runs with --plaintext, add --plaintext"
		if port == defaultHTTPPort || port == defaultDebugPort {
			hint = address + " looks like the HTTP port (monitoring " + defaultHTTPPort + ", debug " + defaultDebugPort +
				"): ADS is on --ads-address (default port " + defaultADSPort + ")"
		}
		return withHint(err, hint)
	case plaintext && (strings.Contains(msg, "error reading server preface") || strings.Contains(msg, "connection closed before server preface")) &&
		!strings.Contains(msg, "http2: frame too large"):
		return withHint(err, "the server at "+address+" expects TLS: drop --plaintext (and pass --ca-file with the CA that signed its certificate)")
	case strings.Contains(msg, "http2: frame too large") || strings.Contains(msg, "HTTP/1.1") || strings.Contains(msg, "malformed header"):
		return withHint(err, address+" answers HTTP/1, not gRPC: it is an HTTP port (monitoring "+defaultHTTPPort+
			", debug "+defaultDebugPort+"); ADS is on --ads-address (default port "+defaultADSPort+")")
	case strings.Contains(msg, "connection refused"):
		return withHint(err, "nothing listens at "+address+": is pilot-discovery running, and is this its --ads-address (default port "+defaultADSPort+")?")
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return withHint(err, "pass --ca-file with the CA that signed the server's certificate")
	}
	return err
}

// httpTransportHint names the fix for an error of proxy-status's HTTP
// request to address.
func httpTransportHint(err error, address string) error {
	msg := err.Error()
	switch {
	// A gRPC server sends its SETTINGS frame first: net/http reads it as a
	// malformed response, or, when it arrives before the request is
	// written, as an unsolicited one and fails with readLoopPeekFailLocked.
	case strings.Contains(msg, "malformed HTTP response") || strings.Contains(msg, "readLoopPeekFailLocked"):
		return withHint(err, address+" answers in HTTP/2 frames: it looks like the ADS (gRPC) port; proxy-status reads the debug port "+
			"(--debug-address, default localhost:"+defaultDebugPort+")")
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return withHint(err, "the debug port serves plain HTTP: use http:// (or HOST:PORT alone)")
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return withHint(err, "the debug port serves plain HTTP: use http:// (or HOST:PORT alone)")
	case strings.Contains(msg, "connection refused"):
		return withHint(err, "nothing listens at "+address+": the debug endpoints listen on loopback ("+
			"--debug-address, default 127.0.0.1:"+defaultDebugPort+"); in a cluster, run "+
			"`kubectl -n infermesh-system port-forward deploy/pilot-discovery "+defaultDebugPort+"` first")
	}
	return err
}
