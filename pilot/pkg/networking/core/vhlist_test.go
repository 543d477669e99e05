// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// TestSpliceVHostsAsNaive: spliceVHosts gives the list a plain filter,
// append and sort gives, over random lists, removals (present and absent
// hosts) and insertions (before, between and after the present ones).
func TestSpliceVHostsAsNaive(t *testing.T) {
	byHost := func(a, b *routev3.VirtualHost) int { return strings.Compare(vhHost(a), vhHost(b)) }
	for seed := uint64(1); seed <= 500; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		var vhs []*routev3.VirtualHost
		var absent []string
		for i := range rng.IntN(40) {
			h := fmt.Sprintf("h%03d.example.com", i*2)
			if rng.IntN(3) == 0 {
				absent = append(absent, h)
				continue
			}
			vhs = append(vhs, virtualHost(h, "80", nil))
		}
		var gone []string
		for _, vh := range vhs {
			if rng.IntN(4) == 0 {
				gone = append(gone, vhHost(vh))
			}
		}
		if len(absent) > 0 && rng.IntN(2) == 0 {
			gone = append(gone, absent[rng.IntN(len(absent))])
		}
		var add []*routev3.VirtualHost
		for _, h := range absent {
			if rng.IntN(2) == 0 {
				add = append(add, virtualHost(h, "80", nil))
			}
		}
		if rng.IntN(2) == 0 {
			add = append(add, virtualHost(fmt.Sprintf("h%03d.example.com", 999-rng.IntN(5)), "80", nil))
		}
		rng.Shuffle(len(gone), func(i, j int) { gone[i], gone[j] = gone[j], gone[i] })
		rng.Shuffle(len(add), func(i, j int) { add[i], add[j] = add[j], add[i] })
		var want []*routev3.VirtualHost
		for _, vh := range vhs {
			if !slices.Contains(gone, vhHost(vh)) {
				want = append(want, vh)
			}
		}
		want = append(want, add...)
		slices.SortFunc(want, byHost)
		got := spliceVHosts(slices.Clone(vhs), gone, slices.Clone(add))
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: got %d hosts, want %d (gone %q, added %d)", seed, len(got), len(want), gone, len(add))
		}
	}
}
