// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"context"
	"fmt"
	"time"
)

// pollInterval is how often start-up checks poll; small, since start-up time is
// a benchmark figure.
const pollInterval = 50 * time.Millisecond

// waitFor polls ready every pollInterval until it returns true, ctx ends, or p
// exits. Each call of ready gets at most 2 s. The error names what was awaited, or carries p's log tail.
func waitFor(ctx context.Context, p *process, what string, ready func(context.Context) bool) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok := ready(attempt)
		cancel()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubeenv: waiting for %s: %w", what, context.Cause(ctx))
		case <-p.exited():
			return p.exitError()
		case <-tick.C:
		}
	}
}
