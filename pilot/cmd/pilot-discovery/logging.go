// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// logLevels are the --log-level values.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// parseLogLevel returns the slog level of s (debug, info, warn or error,
// any case), or an error naming the accepted values.
func parseLogLevel(s string) (slog.Level, error) {
	l, ok := logLevels[strings.ToLower(s)]
	if !ok {
		return 0, fmt.Errorf("--log-level %q: want one of debug, info, warn, error", s)
	}
	return l, nil
}

// newLogger returns a JSON logger at level writing to w (stderr in
// production): one object per line with time, level, msg and the
// structured keys of the call site.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}
