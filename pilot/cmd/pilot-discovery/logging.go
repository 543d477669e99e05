// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// logLevels are the --log-level values.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// Log formats (--log-format).
const (
	logFormatJSON = "json"
	logFormatText = "text"
)

// parseLogLevel returns the slog level of s (debug, info, warn or error,
// any case), or an error naming the accepted values.
func parseLogLevel(s string) (slog.Level, error) {
	l, ok := logLevels[strings.ToLower(s)]
	if !ok {
		return 0, fmt.Errorf("--log-level %q: want one of debug, info, warn, error", s)
	}
	return l, nil
}

// logOptions are the logging flags every subcommand takes (persistent
// flags of the root command).
type logOptions struct {
	format string
	level  string
}

// validate checks both flags; each error names its flag.
func (o logOptions) validate() error {
	if _, err := parseLogLevel(o.level); err != nil {
		return err
	}
	switch o.format {
	case logFormatJSON, logFormatText:
		return nil
	}
	return fmt.Errorf("--log-format %q: want json or text", o.format)
}

// newLogger returns a logger at level writing to w (stderr in production)
// in format: JSON (one object per line with time, level, msg and the
// structured keys of the call site) or slog's key=value text.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == logFormatText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// processHandler is the handler behind slog's default logger and klog (so
// client-go's informers and leader election): it forwards every record to
// the handler of the command that runs now. Both globals are set once per
// process (installProcessLogger); a command only swaps what they forward
// to, atomically. So a command never writes a global that another
// command's goroutines (informers still stopping, in tests) read.
var processHandler = &switchHandler{cur: new(atomic.Pointer[slog.Handler])}

var installOnce sync.Once

// useLogger makes l the target of slog's default logger and of klog,
// installing the forwarding handler on first use.
func useLogger(l *slog.Logger) {
	h := l.Handler()
	processHandler.cur.Store(&h)
	installOnce.Do(func() {
		fwd := slog.New(processHandler)
		slog.SetDefault(fwd)
		klog.SetSlogLogger(fwd)
	})
}

// switchHandler forwards to *cur, applying the attributes and groups added
// to it (WithAttrs, WithGroup) in order. With no current handler records
// are dropped.
type switchHandler struct {
	cur *atomic.Pointer[slog.Handler]
	ops []func(slog.Handler) slog.Handler
}

func (s *switchHandler) target() slog.Handler {
	p := s.cur.Load()
	if p == nil {
		return nil
	}
	h := *p
	for _, op := range s.ops {
		h = op(h)
	}
	return h
}

func (s *switchHandler) Enabled(ctx context.Context, l slog.Level) bool {
	h := s.target()
	return h != nil && h.Enabled(ctx, l)
}

func (s *switchHandler) Handle(ctx context.Context, r slog.Record) error {
	if h := s.target(); h != nil {
		return h.Handle(ctx, r)
	}
	return nil
}

func (s *switchHandler) with(op func(slog.Handler) slog.Handler) *switchHandler {
	return &switchHandler{cur: s.cur, ops: append(append([]func(slog.Handler) slog.Handler(nil), s.ops...), op)}
}

func (s *switchHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return s.with(func(h slog.Handler) slog.Handler { return h.WithAttrs(as) })
}

func (s *switchHandler) WithGroup(name string) slog.Handler {
	return s.with(func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
}
