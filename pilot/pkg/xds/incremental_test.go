// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"bytes"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/modelgen"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// runPushModel drives the push path (pusher and Cache) with the
// incremental translation of modelgen's world (GatewayBuilder's
// translator, static collections of its output and of the endpoints), one
// push per random change, and after each compares what the Cache serves
// the Gateway (listeners, route configurations, clusters, and every
// assignment its clusters use) with a from-scratch translation
// (core.BuildGateway, which validates) serialized alone, byte for byte,
// and each entry's version with the version of those bytes (fullVersion).
func runPushModel(t *testing.T, seed uint64, steps int) {
	stop := make(chan struct{})
	defer close(stop)
	w := modelgen.New(seed)
	gws := krt.NewStaticCollection[GatewayResources](nil, nil, krt.WithStop(stop))
	eps := krt.NewStaticCollection[EndpointResources](nil, nil, krt.WithStop(stop))
	secrets := krt.NewStaticCollection[*corev1.Secret](nil, nil, krt.WithStop(stop))
	m := newMetrics()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := newCache(log, m)
	p := newPusher(log, m, clock.RealClock{}, c, newServingStatus(m, nil), gws, eps, secrets)
	opts := core.Options{InferenceEnabled: true}
	tr := core.NewTranslator(opts)
	for step := 0; step <= steps; step++ {
		what := "initial"
		if step > 0 {
			what = w.Step()
		}
		gw := w.Gateway()
		in := core.Inputs{Endpoints: w.Endpoints()}
		res, err := tr.Build(gw, in)
		gr := GatewayResources{Gateway: gw.ResourceName(), Listeners: res.Listeners, Routes: res.Routes, Clusters: res.Clusters}
		if err != nil {
			gr = GatewayResources{Gateway: gw.ResourceName(), Err: err.Error()}
		}
		gws.UpdateObject(gr)
		for name, e := range in.Endpoints {
			eps.UpdateObject(EndpointResources{Cluster: name, Assignment: core.BuildClusterLoadAssignment(name, e)})
			p.dirtyEP[name] = struct{}{}
		}
		p.dirtyGW[gr.Gateway] = struct{}{}
		p.push()

		want, wantErr := core.BuildGateway(gw, in, opts)
		if wantErr != nil {
			continue // the last good set stays; nothing new to compare
		}
		snap, edsEntries, _, ok := c.snapshot(gr.Gateway)
		if !ok {
			t.Fatalf("seed %d step %d (%s): nothing published", seed, step, what)
		}
		check := func(k kind, got []*entry, msgs []proto.Message) {
			t.Helper()
			// Entries are by name, as the Cache serves them.
			slices.SortStableFunc(msgs, func(a, b proto.Message) int { return strings.Compare(xdsName(a), xdsName(b)) })
			if len(got) != len(msgs) {
				t.Fatalf("seed %d step %d (%s): %d %s resources, full translation %d", seed, step, what, len(got), k, len(msgs))
			}
			for i, msg := range msgs {
				b, err := marshalOpts.Marshal(msg)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got[i].any.GetValue(), b) {
					var gm proto.Message = msg.ProtoReflect().New().Interface()
					_ = proto.Unmarshal(got[i].any.GetValue(), gm)
					t.Fatalf("seed %d step %d (%s): %s %s differs from the full translation:\n%v\nwant\n%v", seed, step, what, k, got[i].name, gm, msg)
				}
				if want := fullVersion(k, b); got[i].version != want {
					t.Fatalf("seed %d step %d (%s): %s %s version %s, the full translation's %s", seed, step, what, k, got[i].name, got[i].version, want)
				}
			}
		}
		check(kindListener, snap.byKind[kindListener], toMessages(want.Listeners))
		check(kindRoute, snap.byKind[kindRoute], toMessages(want.Routes))
		check(kindCluster, snap.byKind[kindCluster], toMessages(want.Clusters))
		check(kindEndpoint, edsEntries, toMessages(want.Endpoints))
	}
}

// fullVersion is the version of a resource of kind k serialized whole as
// b: the hash of the bytes, or for a route configuration the hash of its
// parts read back from the bytes (routeConfigurationVersion), which the
// push path computes from the parts it keeps instead.
func fullVersion(k kind, b []byte) string {
	if k == kindRoute {
		return routeConfigurationVersion(b)
	}
	return hashHex(xxhash.Sum64(b))
}

// xdsName is the xDS name of a translated resource.
func xdsName(m proto.Message) string {
	if cla, ok := m.(interface{ GetClusterName() string }); ok {
		return cla.GetClusterName()
	}
	return m.(interface{ GetName() string }).GetName()
}

func toMessages[T proto.Message](l []T) []proto.Message {
	out := make([]proto.Message, len(l))
	for i, m := range l {
		out[i] = m
	}
	return out
}

// TestPushPathMatchesFullTranslation runs runPushModel at fixed seeds (in
// make test); FuzzPushPath runs it longer (make fuzz-translator).
func TestPushPathMatchesFullTranslation(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		runPushModel(t, seed, 80)
	}
}

func FuzzPushPath(f *testing.F) {
	f.Add(uint64(1), uint8(50))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		runPushModel(t, seed, int(steps))
	})
}
