// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"slices"
	"testing"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/test/modelgen"
)

// TestTranslatorEPPHostsAsFresh: the EPP hosts the Translator asks the
// inputs for (BuildWith), kept up to date with the routes over random
// changes of modelgen's world, are after every step those a new
// Translator asks for on the same Gateway: sorted, each once.
// (TestTranslatorMatchesFullTranslation gives fixed inputs and so does
// not look at them; xds.GatewayBuilder fetches the EPPs' TLS by them.)
func TestTranslatorEPPHostsAsFresh(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		w := modelgen.New(seed)
		tr := NewTranslator(inferenceOn)
		for step := 0; step <= 120; step++ {
			what := "initial"
			if step > 0 {
				what = w.Step()
			}
			gw := w.Gateway()
			in := Inputs{EPPTLS: w.EPPTLS(), Endpoints: w.Endpoints()}
			var got, want []string
			_, gotErr := tr.BuildWith(gw, func(hosts []string) Inputs { got = slices.Clone(hosts); return in })
			_, wantErr := NewTranslator(inferenceOn).BuildWith(gw, func(hosts []string) Inputs { want = slices.Clone(hosts); return in })
			if (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("seed %d step %d (%s): error %v, fresh %v", seed, step, what, gotErr, wantErr)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d (%s): EPP hosts %q, a fresh Translator's %q", seed, step, what, got, want)
			}
		}
	}
}

// TestTranslatorEPPHostsMany: with many EPP hosts coming or going at once
// (a first translation, half the routes removed, all added back), the
// hosts asked for are EPPHosts of the Gateway (every route of bigGateway
// has its own pool, so each pool's EPP is used).
func TestTranslatorEPPHostsMany(t *testing.T) {
	gw, in := bigGateway(64)
	half := *gw
	l := half.Listeners[0]
	l.Routes = l.Routes[:32]
	half.Listeners = []model.Listener{l}
	tr := NewTranslator(inferenceOn)
	for i, g := range []*model.Gateway{gw, &half, gw} {
		var got []string
		if _, err := tr.BuildWith(g, func(hosts []string) Inputs { got = slices.Clone(hosts); return in }); err != nil {
			t.Fatal(err)
		}
		if want := EPPHosts(g); len(want) < 32 || !slices.Equal(got, want) {
			t.Fatalf("build %d: EPP hosts %q, want %q", i, got, want)
		}
	}
}
