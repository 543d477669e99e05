// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessStop checks that stop ends a process that obeys SIGTERM, and falls
// back to SIGKILL for the whole process group of one that ignores it.
func TestProcessStop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		grace  time.Duration
	}{
		{"sigterm", "echo started; exec sleep 60", 5 * time.Second},
		{"sigkill", "trap '' TERM; echo started; sleep 60 & wait", 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &process{name: "sh", path: "/bin/sh", args: []string{"-c", tc.script}, logPath: filepath.Join(t.TempDir(), "log")}
			if err := p.start(); err != nil {
				t.Fatal(err)
			}
			pid := p.run.cmd.Process.Pid
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(p.logTail(100), "started") {
				if time.Now().After(deadline) {
					t.Fatal("the child never started")
				}
				time.Sleep(10 * time.Millisecond)
			}
			began := time.Now()
			if err := p.stop(tc.grace); err != nil {
				t.Fatal(err)
			}
			// Grandchildren die with the group's SIGKILL but are reaped by init.
			for syscall.Kill(-pid, 0) != syscall.ESRCH {
				if time.Since(began) > tc.grace+5*time.Second {
					t.Fatalf("process group %d still exists after stop", pid)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if took := time.Since(began); took > tc.grace+5*time.Second {
				t.Errorf("stop took %v", took)
			}
			if err := p.stop(tc.grace); err != nil {
				t.Errorf("second stop: %v", err)
			}
		})
	}
}
