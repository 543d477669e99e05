// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// fairnessPools is the size of the fairness check.
const fairnessPools = 100

// fairnessWait bounds how long the second side's proxies get to hold their
// complete configuration; at 100 pools both sides need about a second.
const fairnessWait = 20 * time.Second

// dropEPPKnob names a pool whose EPP our side does not see
// (PIPELINE_DROP_EPP=pool-0042): a test-only knob to show that the
// fairness check catches a difference. hack/bench-istio.sh passes DROP_EPP
// through.
const dropEPPKnob = "PIPELINE_DROP_EPP"

// ourSideForFairness is our side, without the EPP of the pool the knob
// names, if any.
func ourSideForFairness() Side {
	pool := os.Getenv(dropEPPKnob)
	if pool == "" {
		return OurSide(nil)
	}
	return OurSide(func(in *Inputs) (*Inputs, error) { return in.WithoutEPP(pool) })
}

// TestFairness: at 100 pools, over one Gateway and over ten, both control
// planes give every Gateway's proxy the same routes, clusters and endpoints
// for every pool, with the same inference fields (GatewayView). The
// benchmark's race is only fair if this holds.
func TestFairness(t *testing.T) {
	for _, g := range []int{1, 10} {
		t.Run(fmt.Sprintf("gateways=%d", g), func(t *testing.T) {
			in := cachedInputs(t, fairnessPools, g)
			diffs := compareSides(t, in, IstioSide(), ourSideForFairness())
			if len(diffs) > 0 {
				t.Fatalf("%d differences between Istio and infermesh:\n%s", len(diffs), strings.Join(diffs, "\n"))
			}
		})
	}
}

// TestFairnessCatchesDroppedEPP: with one pool's EPP dropped on our side,
// the check reports that pool, its ext_proc override, and nothing else.
func TestFairnessCatchesDroppedEPP(t *testing.T) {
	in := cachedInputs(t, fairnessPools, 1)
	const pool = "pool-0042"
	diffs := compareSides(t, in, IstioSide(), OurSide(func(in *Inputs) (*Inputs, error) { return in.WithoutEPP(pool) }))
	if len(diffs) != 1 {
		t.Fatalf("want one difference (pool %s), got %d:\n%s", pool, len(diffs), strings.Join(diffs, "\n"))
	}
	if !strings.Contains(diffs[0], "pool "+pool) || !strings.Contains(diffs[0], "ExtProc") {
		t.Fatalf("the difference does not name pool %s's ext_proc override:\n%s", pool, diffs[0])
	}
	t.Logf("caught:\n%s", diffs[0])
}

// compareSides starts both sides over in and compares what the proxies
// hold. Side a is the reference: its proxies must get their complete
// configuration. Side b's proxies get fairnessWait to do the same; when
// they do not (b was given other inputs), the comparison runs on what
// they hold once b is idle, so that it names what differs.
func compareSides(t *testing.T, in *Inputs, a, b Side) []string {
	t.Helper()
	var runs []*Run
	for i, side := range []Side{a, b} {
		r, err := Prepare(side, in)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		wait := 2 * time.Minute
		if i == 1 {
			wait = fairnessWait
		}
		if err := r.WaitComplete(wait); err != nil {
			if i == 0 {
				t.Fatal(err)
			}
			t.Logf("incomplete after %v: %v", wait, err)
		}
		if err := r.Settle(settleQuiet, settleMax); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	// What is compared, for one pool.
	for _, r := range runs {
		v, err := r.View(in.Pool[0].Gateway)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s, pool %s: %+v; EPP: %+v; ext_proc filter: %v", r.Side.Name, in.Pool[0].Name, v.Pools[in.Pool[0].Name], v.EPP, v.ExtProcFilter)
	}
	diffs, err := CompareViews(runs[0], runs[1])
	if err != nil {
		t.Fatal(err)
	}
	return diffs
}
