// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"net/netip"
	"testing"
	"time"
)

func TestIPAMSkipsGatewayAndBroadcastAndRotates(t *testing.T) {
	a := newIPAM(netip.MustParsePrefix("10.244.64.0/30")) // .1 gateway, .2 only, .3 broadcast
	first, err := a.allocate()
	if err != nil || first.String() != "10.244.64.2" {
		t.Fatalf("allocate = %v, %v; want 10.244.64.2", first, err)
	}
	if got, err := a.allocate(); err == nil {
		t.Fatalf("a full /30 gave %v", got)
	}
	a.release(first)
	if got, err := a.allocate(); err != nil || got != first {
		t.Fatalf("after release: %v, %v", got, err)
	}
	b := newIPAM(netip.MustParsePrefix("10.244.64.0/29"))
	x, _ := b.allocate()
	b.release(x)
	if y, _ := b.allocate(); y == x {
		t.Fatalf("a released address (%v) was given again before the others", x)
	}
}

func TestBackOffDoublesToItsCap(t *testing.T) {
	c := Config{InitialBackOff: 10 * time.Second, MaxBackOff: 300 * time.Second}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	for n, w := range want {
		if got := c.backOff(n); got != w {
			t.Errorf("backOff(%d) = %v, want %v", n, got, w)
		}
	}
}
