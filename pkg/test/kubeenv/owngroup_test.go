// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"errors"
	"os/exec"
	"testing"
)

// TestRunInOwnGroup: a child that died of SIGINT (as one forked while the
// group's Ctrl-C arrived does) is run once more; one that failed otherwise,
// or died of SIGINT twice, is not.
func TestRunInOwnGroup(t *testing.T) {
	interrupted := func() *exec.Cmd { return exec.Command("sh", "-c", "kill -INT $$") }
	for _, tc := range []struct {
		name    string
		cmds    []func() *exec.Cmd
		calls   int
		wantErr bool
	}{
		{"succeeds", []func() *exec.Cmd{func() *exec.Cmd { return exec.Command("true") }}, 1, false},
		{"fails: not run again", []func() *exec.Cmd{func() *exec.Cmd { return exec.Command("false") }}, 1, true},
		{"SIGINT, then succeeds", []func() *exec.Cmd{interrupted, func() *exec.Cmd { return exec.Command("true") }}, 2, false},
		{"SIGINT twice", []func() *exec.Cmd{interrupted, interrupted}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := RunInOwnGroup(func() *exec.Cmd {
				c := tc.cmds[min(calls, len(tc.cmds)-1)]()
				calls++
				return c
			})
			if calls != tc.calls {
				t.Errorf("%d commands run, want %d", calls, tc.calls)
			}
			var exit *exec.ExitError
			if (err != nil) != tc.wantErr || (err != nil && !errors.As(err, &exit)) {
				t.Errorf("error %v, want an exit error: %t", err, tc.wantErr)
			}
		})
	}
}
