// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts a CPU profile of the whole process written to
// path (--profile-cpu). Start-up is over before a profile can be asked of
// /debug/pprof/profile, so this is the way to see what start-up spends its
// time on. The returned function stops the profile and closes the file.
func startCPUProfile(path string) (func(*slog.Logger), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--profile-cpu: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--profile-cpu: %w", err)
	}
	return func(log *slog.Logger) {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Error("--profile-cpu: closing the profile", "path", path, "error", err)
			return
		}
		log.Info("CPU profile written", "path", path)
	}, nil
}
