// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"log/slog"
	"os"

	"github.com/infermesh/infermesh/pkg/test/dataplane"
	"github.com/infermesh/infermesh/pkg/test/gwproxy"
)

// debugLogger logs the data plane's events to stderr when GIE_DEBUG is
// set; otherwise nil (discarded).
func debugLogger() *slog.Logger {
	if os.Getenv("GIE_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// dataPlane returns the test data plane, or nil under real Envoy: checks of
// the data plane's own counters run only on it.
func (h *harness) dataPlane() *dataplane.DataPlane {
	if p, ok := h.gw.(*gwproxy.DataPlane); ok {
		return p.DP
	}
	return nil
}
