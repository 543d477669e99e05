// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"slices"
	"time"
)

func (p *retryPolicy) retriesFailure(kind string) bool {
	if p == nil {
		return false
	}
	switch kind {
	case "connect":
		return p.onConnFail || p.on5xx || p.onGatewayError || p.onReset
	default:
		return p.onReset || p.on5xx || p.onGatewayError
	}
}

// retriesStatus is RetryStateImpl::wouldRetryFromHeaders for a status:
// 5xx any 5xx, gateway-error 502-504, retriable-status-codes the listed
// codes.
func (p *retryPolicy) retriesStatus(code int) bool {
	if p == nil {
		return false
	}
	return (p.on5xx && code >= 500) || (p.onGatewayError && code >= 502 && code <= 504) ||
		(p.onStatusCodes && slices.Contains(p.statusCodes, code))
}

// retryBackOff is the wait before retry n (1-based):
// JitteredExponentialBackOffStrategy::nextBackOffMs
// (source/common/common/backoff_strategy.cc), a random duration below the
// current interval, which starts at base_interval and doubles after each
// retry up to max_interval: below base, 2 x base, 4 x base, ...
func (dp *DataPlane) retryBackOff(p *retryPolicy, n int) time.Duration {
	if p == nil || p.backOffBase <= 0 {
		return 0
	}
	bound := p.backOffMax
	if n <= 30 {
		if b := p.backOffBase << (n - 1); b > 0 && b < bound {
			bound = b
		}
	}
	if bound <= 0 {
		return 0
	}
	return time.Duration(dp.randUnder(uint64(bound)))
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
