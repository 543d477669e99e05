// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/test/modelgen"
)

// fullTranslation is what the full builders return for gw, as
// xds.GatewayBuilder calls them: listeners, routes, clusters, the first
// error prefixed with its stage.
func fullTranslation(gw *model.Gateway, in Inputs, opts Options) (Resources, error) {
	var res Resources
	var err error
	if res.Listeners, err = BuildListeners(gw, opts); err != nil {
		return Resources{}, fmt.Errorf("listeners: %w", err)
	}
	if res.Routes, err = BuildRouteConfigurations(gw, opts); err != nil {
		return Resources{}, fmt.Errorf("routes: %w", err)
	}
	if res.Clusters, err = BuildClusters(gw, in, opts); err != nil {
		return Resources{}, fmt.Errorf("clusters: %w", err)
	}
	return res, nil
}

// sameBytes reports the first difference between two translations, each
// resource serialized as the push path serializes it.
func sameBytes(a, b Resources) error {
	enc := func(r Resources) []string {
		var out []string
		mo := proto.MarshalOptions{Deterministic: true}
		for _, m := range r.Listeners {
			bs, _ := mo.Marshal(m)
			out = append(out, "listener "+m.GetName()+" "+string(bs))
		}
		for _, m := range r.Routes {
			bs, _ := mo.Marshal(m)
			out = append(out, "route "+m.GetName()+" "+string(bs))
		}
		for _, m := range r.Clusters {
			bs, _ := mo.Marshal(m)
			out = append(out, "cluster "+m.GetName()+" "+string(bs))
		}
		return out
	}
	x, y := enc(a), enc(b)
	for i := 0; i < len(x) || i < len(y); i++ {
		switch {
		case i >= len(x):
			return fmt.Errorf("incremental lacks %.60q", y[i])
		case i >= len(y):
			return fmt.Errorf("incremental has extra %.60q", x[i])
		case !bytes.Equal([]byte(x[i]), []byte(y[i])):
			return fmt.Errorf("resource %d differs:\nincremental %q\nfull        %q", i, x[i], y[i])
		}
	}
	return nil
}

// runTranslatorModel applies steps random changes of modelgen's world
// (seed) and after each compares the Translator's output with the full
// translation, byte for byte, and errors by text. After a step that
// changes nothing a translation depends on (Rebuild: new route pointers,
// same values), every message must be the previous one.
func runTranslatorModel(t *testing.T, seed uint64, steps int) {
	w := modelgen.New(seed)
	tr := NewTranslator(inferenceOn)
	var prev Resources
	for step := 0; step <= steps; step++ {
		what := "initial"
		if step > 0 {
			what = w.Step()
		}
		gw := w.Gateway()
		in := Inputs{Endpoints: w.Endpoints()}
		got, gotErr := tr.Build(gw, in)
		want, wantErr := fullTranslation(gw, in, inferenceOn)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("seed %d step %d (%s): error %v, full translation %v", seed, step, what, gotErr, wantErr)
		}
		if err := sameBytes(got, want); err != nil {
			t.Fatalf("seed %d step %d (%s): %v", seed, step, what, err)
		}
		if what == "rebuild" && gotErr == nil && prev.Listeners != nil {
			if err := sameMessages(prev, got); err != nil {
				t.Fatalf("seed %d step %d (%s): %v", seed, step, what, err)
			}
		}
		prev = got
	}
}

// sameMessages reports a resource of b that is not a's message.
func sameMessages(a, b Resources) error {
	if len(a.Routes) != len(b.Routes) || len(a.Clusters) != len(b.Clusters) || len(a.Listeners) != len(b.Listeners) {
		return fmt.Errorf("resource counts changed")
	}
	for i := range a.Routes {
		if a.Routes[i] != b.Routes[i] {
			return fmt.Errorf("route configuration %s translated again", b.Routes[i].GetName())
		}
	}
	for i := range a.Clusters {
		if a.Clusters[i] != b.Clusters[i] {
			return fmt.Errorf("cluster %s translated again", b.Clusters[i].GetName())
		}
	}
	for i := range a.Listeners {
		if a.Listeners[i] != b.Listeners[i] {
			return fmt.Errorf("listener %s translated again", b.Listeners[i].GetName())
		}
	}
	return nil
}

// TestTranslatorMatchesFullTranslation: at fixed seeds (in make test), the
// incremental translation equals the full one after every one of 150
// random route, attachment, pool, Service, EPP TLS, endpoint and listener
// changes (6 seeds of 120 steps: under the race detector of make test
// this is seconds). FuzzTranslator runs the same property for longer
// (make fuzz-translator).
func TestTranslatorMatchesFullTranslation(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		runTranslatorModel(t, seed, 120)
	}
}

func FuzzTranslator(f *testing.F) {
	f.Add(uint64(1), uint8(50))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		runTranslatorModel(t, seed, int(steps))
	})
}

// runValidatorModel: over modelgen's random changes, SetValidator.Valid
// answers as Validate does, on the Translator's output and on copies with
// one part broken (a cluster dropped, duplicated or invalid, a virtual
// host with a refused header or a route to a missing cluster), which share
// every other message with the output.
func runValidatorModel(t *testing.T, seed uint64, steps int) {
	w := modelgen.New(seed)
	tr := NewTranslator(inferenceOn)
	var v SetValidator
	rnd := rand.New(rand.NewPCG(seed, 7))
	for step := 0; step <= steps; step++ {
		what := "initial"
		if step > 0 {
			what = w.Step()
		}
		gw := w.Gateway()
		in := Inputs{Endpoints: w.Endpoints()}
		res, err := tr.Build(gw, in)
		if err != nil {
			continue
		}
		if rnd.IntN(3) == 0 {
			var broke string
			res, broke = breakOne(rnd, res)
			what += ", then " + broke
		}
		full := res
		full.Endpoints = BuildEndpoints(res.Clusters, in)
		want := Validate(full) == nil
		if got := v.Valid(res); got != want {
			t.Fatalf("seed %d step %d (%s): Valid %t, Validate %v", seed, step, what, got, Validate(full))
		}
	}
}

// breakOne is res with one part broken, every other message shared.
func breakOne(rnd *rand.Rand, res Resources) (Resources, string) {
	out := res
	switch rnd.IntN(5) {
	case 0:
		if len(res.Clusters) == 0 {
			return res, "nothing"
		}
		i := rnd.IntN(len(res.Clusters))
		out.Clusters = slices.Delete(slices.Clone(res.Clusters), i, i+1)
		return out, "cluster " + res.Clusters[i].GetName() + " dropped"
	case 1:
		if len(res.Clusters) == 0 {
			return res, "nothing"
		}
		i := rnd.IntN(len(res.Clusters))
		out.Clusters = slices.Insert(slices.Clone(res.Clusters), i, proto.Clone(res.Clusters[i]).(*clusterv3.Cluster))
		return out, "cluster " + res.Clusters[i].GetName() + " duplicated"
	case 2:
		if len(res.Clusters) == 0 {
			return res, "nothing"
		}
		i := rnd.IntN(len(res.Clusters))
		c := proto.Clone(res.Clusters[i]).(*clusterv3.Cluster)
		c.ConnectTimeout = durationpb.New(-time.Second)
		out.Clusters = slices.Clone(res.Clusters)
		out.Clusters[i] = c
		return out, "cluster " + c.GetName() + " invalid"
	default:
		if len(res.Routes) == 0 || len(res.Routes[0].GetVirtualHosts()) == 0 {
			return res, "nothing"
		}
		ri := rnd.IntN(len(res.Routes))
		rc := res.Routes[ri]
		if len(rc.GetVirtualHosts()) == 0 {
			return res, "nothing"
		}
		vi := rnd.IntN(len(rc.GetVirtualHosts()))
		vh := proto.Clone(rc.GetVirtualHosts()[vi]).(*routev3.VirtualHost)
		what := "virtual host " + vh.GetName()
		if rnd.IntN(2) == 0 {
			vh.RequestHeadersToRemove = append(vh.RequestHeadersToRemove, "host")
			what += " removes host"
		} else {
			vh.Routes = append(vh.Routes, &routev3.Route{Name: "broken", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "outbound|1||missing"}}}})
			what += " routes to a missing cluster"
		}
		nrc := withoutVirtualHosts(rc)
		nrc.VirtualHosts = slices.Clone(rc.GetVirtualHosts())
		nrc.VirtualHosts[vi] = vh
		out.Routes = slices.Clone(res.Routes)
		out.Routes[ri] = nrc
		return out, what
	}
}

// TestSetValidatorAnswersAsValidate runs runValidatorModel at fixed seeds
// (in make test); FuzzSetValidator runs it longer.
func TestSetValidatorAnswersAsValidate(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		runValidatorModel(t, seed, 100)
	}
}

func FuzzSetValidator(f *testing.F) {
	f.Add(uint64(1), uint8(50))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		runValidatorModel(t, seed, int(steps))
	})
}
