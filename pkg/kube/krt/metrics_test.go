// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// The metric vectors are package-global: every test uses collection names of
// its own, and reads only those series.

var nameSeq atomic.Int64

// uniqueName returns prefix with a suffix no other call returned, so that
// -count=N runs do not share series.
func uniqueName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1)) }

// sample is one series value, or absent.
type sample struct {
	value float64
	ok    bool
}

// metricValue gathers reg and returns the value of family name for the series
// whose labels include want (counter, gauge, or a histogram's sample count).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) sample {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return sample{m.GetCounter().GetValue(), true}
			case m.GetGauge() != nil:
				return sample{m.GetGauge().GetValue(), true}
			case m.GetHistogram() != nil:
				return sample{float64(m.GetHistogram().GetSampleCount()), true}
			}
		}
	}
	return sample{}
}

func newMetricsRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := krt.RegisterMetrics(reg); err != nil {
		t.Fatalf("RegisterMetrics: %v", err)
	}
	return reg
}

func TestMetricsRegisterTwiceFails(t *testing.T) {
	reg := newMetricsRegistry(t)
	if err := krt.RegisterMetrics(reg); err == nil {
		t.Error("second RegisterMetrics on one registry returned nil")
	}
}

func TestMetricsStaticCollection(t *testing.T) {
	reg := newMetricsRegistry(t)
	name := uniqueName("metrics-test-static")
	c := krt.NewStaticCollection(nil, []pod{podA, podB}, krt.WithName(name))
	c.UpdateObject(withIP(podA, "10.0.0.9"))
	c.ConditionalUpdateObject(withIP(podA, "10.0.0.9")) // equal: no event
	c.DeleteObject("ns/b")
	c.UpdateObject(podC)
	c.DeleteObject("ns/missing") // nothing: no event

	want := map[string]sample{
		"size":   {2, true},
		"add":    {3, true},
		"update": {1, true},
		"delete": {1, true},
	}
	got := map[string]sample{"size": metricValue(t, reg, "krt_collection_size", map[string]string{"collection": name})}
	for _, typ := range []string{"add", "update", "delete"} {
		got[typ] = metricValue(t, reg, "krt_collection_events_total", map[string]string{"collection": name, "type": typ})
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(sample{})); diff != "" {
		t.Errorf("metrics of %s (-want +got):\n%s", name, diff)
	}
}

func TestMetricsDerivedCollection(t *testing.T) {
	reg := newMetricsRegistry(t)
	name := uniqueName("metrics-test-derived")
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA, podB}, krt.WithStop(stop), krt.WithName(name+"-input"))
	ips := krt.NewCollection(pods, func(_ krt.HandlerContext, p pod) *view {
		return &view{Name: p.ResourceName(), Items: []string{p.IP}}
	}, krt.WithStop(stop), krt.WithName(name))
	waitSynced(t, ips)
	// One step at a time: a burst would be coalesced into fewer runs.
	pods.UpdateObject(withIP(podA, "10.0.0.9"))
	eventually(t, "ns/a update", func() bool { return cmp.Equal(itemsOf(ips, "ns/a"), []string{"10.0.0.9"}) })
	pods.UpdateObject(podB) // reruns, output equal: no event
	eventually(t, "ns/b rerun", func() bool { return krt.Stats(ips).Transformations >= 4 })
	pods.DeleteObject("ns/b")
	eventually(t, "ns/b removal", func() bool { return ips.GetKey("ns/b") == nil })
	runs := krt.Stats(ips).Transformations
	if runs != 4 {
		t.Errorf("Stats transformations = %d, want 4 (2 initial, 2 updates; a deletion runs nothing)", runs)
	}

	labels := map[string]string{"collection": name}
	got := map[string]sample{
		"transformations": metricValue(t, reg, "krt_collection_transformations_total", labels),
		"duration count":  metricValue(t, reg, "krt_collection_transformation_duration_seconds", labels),
		"size":            metricValue(t, reg, "krt_collection_size", labels),
		"add":             metricValue(t, reg, "krt_collection_events_total", map[string]string{"collection": name, "type": "add"}),
		"update":          metricValue(t, reg, "krt_collection_events_total", map[string]string{"collection": name, "type": "update"}),
		"delete":          metricValue(t, reg, "krt_collection_events_total", map[string]string{"collection": name, "type": "delete"}),
	}
	want := map[string]sample{
		"transformations": {float64(runs), true},
		"duration count":  {float64(runs), true},
		"size":            {1, true},
		"add":             {2, true},
		"update":          {1, true},
		"delete":          {1, true},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(sample{})); diff != "" {
		t.Errorf("metrics of %s (-want +got):\n%s", name, diff)
	}
}

func TestMetricsSeriesDroppedOnStop(t *testing.T) {
	reg := newMetricsRegistry(t)
	name := uniqueName("metrics-test-stopped")
	stop := make(chan struct{})
	c := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop), krt.WithName(name))
	if s := metricValue(t, reg, "krt_collection_size", map[string]string{"collection": name}); !s.ok || s.value != 1 {
		t.Fatalf("size before stop = %+v, want 1", s)
	}
	close(stop)
	eventually(t, "the series to be dropped", func() bool {
		return !metricValue(t, reg, "krt_collection_size", map[string]string{"collection": name}).ok
	})
	// A later change of the stopped collection does not bring them back.
	c.UpdateObject(podB)
	if s := metricValue(t, reg, "krt_collection_size", map[string]string{"collection": name}); s.ok {
		t.Errorf("size series of a stopped collection = %+v, want none", s)
	}
}
