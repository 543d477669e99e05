// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"math/rand/v2"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/modelgen"
)

// TestRouteConfigurationsEqualAsProtoEqual: routeConfigurationsEqual (the
// GatewayResources comparison that skips virtual hosts that are the same
// message) answers as proto.Equal on every pair of route configuration
// lists: consecutive incremental translations of random changes (which
// share most virtual hosts), the incremental and the full translation of
// the same Gateway (equal content, no shared messages), and copies with
// one part changed (a virtual host's route, a virtual host added or
// removed, a field other than virtual_hosts, an unknown field).
func TestRouteConfigurationsEqualAsProtoEqual(t *testing.T) {
	reference := func(a, b []*routev3.RouteConfiguration) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if !proto.Equal(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	check := func(what string, a, b []*routev3.RouteConfiguration) (equal bool) {
		t.Helper()
		got, want := routeConfigurationsEqual(a, b), reference(a, b)
		if got != want {
			t.Fatalf("%s: routeConfigurationsEqual %t, proto.Equal %t", what, got, want)
		}
		return want
	}
	opts := core.Options{InferenceEnabled: true}
	counts := map[bool]int{}
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		w := modelgen.New(seed)
		tr := core.NewTranslator(opts)
		var last []*routev3.RouteConfiguration
		for step := range 60 {
			what := w.Step()
			res, err := tr.Build(w.Gateway(), core.Inputs{})
			if err != nil {
				continue
			}
			full, err := core.BuildRouteConfigurations(w.Gateway(), opts)
			if err != nil {
				t.Fatal(err)
			}
			counts[check(what+" against the last", last, res.Routes)]++
			if !check(what+" against the full translation", res.Routes, full) {
				t.Fatalf("seed %d step %d: incremental and full translation differ", seed, step)
			}
			last = res.Routes
			if len(res.Routes) == 0 {
				continue
			}
			// A copy sharing every virtual host but one part changed.
			i := rng.IntN(len(res.Routes))
			rc := res.Routes[i]
			c := &routev3.RouteConfiguration{}
			proto.Merge(c, rc)
			c.VirtualHosts = append([]*routev3.VirtualHost(nil), rc.GetVirtualHosts()...)
			switch n := len(c.VirtualHosts); rng.IntN(5) {
			case 0:
				if n > 0 {
					j := rng.IntN(n)
					vh := proto.Clone(c.VirtualHosts[j]).(*routev3.VirtualHost)
					vh.Routes = append(vh.Routes, &routev3.Route{Name: "extra"})
					c.VirtualHosts[j] = vh
				}
			case 1:
				if n > 0 {
					j := rng.IntN(n)
					c.VirtualHosts = append(c.VirtualHosts[:j], c.VirtualHosts[j+1:]...)
				}
			case 2:
				c.VirtualHosts = append(c.VirtualHosts, &routev3.VirtualHost{Name: "extra"})
			case 3:
				c.ValidateClusters = wrapperspb.Bool(!c.GetValidateClusters().GetValue())
			case 4:
				c.ProtoReflect().SetUnknown(protowire.AppendTag(nil, 1000, protowire.VarintType))
				c.ProtoReflect().SetUnknown(protowire.AppendVarint(c.ProtoReflect().GetUnknown(), 1))
			}
			changed := append([]*routev3.RouteConfiguration(nil), res.Routes...)
			changed[i] = c
			counts[check(what+" against a changed copy", res.Routes, changed)]++
			same := &routev3.RouteConfiguration{}
			proto.Merge(same, rc)
			same.VirtualHosts = append([]*routev3.VirtualHost(nil), rc.GetVirtualHosts()...)
			changed[i] = same
			counts[check(what+" against an equal copy", res.Routes, changed)]++
		}
	}
	if counts[true] == 0 || counts[false] == 0 {
		t.Fatalf("pairs equal %d, different %d: both must occur", counts[true], counts[false])
	}
}
