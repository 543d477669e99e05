// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"log/slog"
	"net"
)

// defaultDebugAddress is where the debug endpoints listen unless
// --debug-address says otherwise: loopback, so in a cluster only
// `kubectl port-forward` (or a process in the pod) reaches them.
const defaultDebugAddress = "127.0.0.1:15015"

// listenDebug binds --debug-address; nil, nil when it is empty (off).
func listenDebug(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-address: %w", err)
	}
	return lis, nil
}

// warnDebugOnNetwork logs a warning when the debug listener is bound to an
// address other than loopback: the operator opted in to serving every
// Gateway's configuration, unauthenticated, to whoever reaches it.
func warnDebugOnNetwork(log *slog.Logger, lis net.Listener) {
	if lis == nil {
		return
	}
	if a, ok := lis.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
		return
	}
	log.Warn("the debug endpoints are served beyond loopback, unauthenticated: anyone who reaches --debug-address reads every Gateway's configuration",
		"debug", lis.Addr().String())
}

// addrString is the listener's address, or "" when it is nil.
func addrString(lis net.Listener) string {
	if lis == nil {
		return ""
	}
	return lis.Addr().String()
}
