// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of every collection, labelled by collection name. They are created
// unregistered; RegisterMetrics adds them to a registry (pilot-discovery's
// /metrics). Names:
//
//	krt_collection_size{collection}                          gauge, objects
//	krt_collection_events_total{collection,type}             counter, add|update|delete
//	krt_collection_transformations_total{collection}         counter, transformation runs
//	krt_collection_transformation_duration_seconds{collection} histogram, seconds
//	krt_collection_transformation_panics_total{collection}   counter, recovered panics
var (
	sizeGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "krt_collection_size",
		Help: "Number of objects in a krt collection.",
	}, []string{"collection"})
	eventsCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "krt_collection_events_total",
		Help: "Events emitted by a krt collection, by type (add, update, delete).",
	}, []string{"collection", "type"})
	transformCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "krt_collection_transformations_total",
		Help: "Transformation runs (recomputations) of a derived krt collection.",
	}, []string{"collection"})
	panicsCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "krt_collection_transformation_panics_total",
		Help: "Transformation runs of a derived krt collection that panicked (recovered; the input keeps its previous result).",
	}, []string{"collection"})
	transformDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "krt_collection_transformation_duration_seconds",
		Help:    "Duration of one transformation run of a derived krt collection, in seconds.",
		Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10), // 1us .. 262ms
	}, []string{"collection"})
)

// RegisterMetrics registers the krt metrics with reg. It returns the first
// registration error (for example when called twice on one registry).
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{sizeGauge, eventsCounter, transformCounter, transformDuration, panicsCounter} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// collectionMetrics caches one collection's children so the hot paths do no
// label lookups.
type collectionMetrics struct {
	name                  string
	size                  prometheus.Gauge
	adds, updates, delete prometheus.Counter
	transforms            prometheus.Counter
	panics                prometheus.Counter
	duration              prometheus.Observer
}

// seriesRefs counts live collections per name, so that collections sharing a
// name share series and the last one to stop removes them.
var (
	seriesMu   sync.Mutex
	seriesRefs = map[string]int{}
)

func newCollectionMetrics(name string) *collectionMetrics {
	seriesMu.Lock()
	seriesRefs[name]++
	seriesMu.Unlock()
	return &collectionMetrics{
		name:       name,
		size:       sizeGauge.WithLabelValues(name),
		adds:       eventsCounter.WithLabelValues(name, EventAdd.String()),
		updates:    eventsCounter.WithLabelValues(name, EventUpdate.String()),
		delete:     eventsCounter.WithLabelValues(name, EventDelete.String()),
		transforms: transformCounter.WithLabelValues(name),
		panics:     panicsCounter.WithLabelValues(name),
		duration:   transformDuration.WithLabelValues(name),
	}
}

func observeEvents[T any](m *collectionMetrics, events []Event[T], size int) {
	var a, u, d int
	for _, e := range events {
		switch e.Event {
		case EventAdd:
			a++
		case EventUpdate:
			u++
		case EventDelete:
			d++
		}
	}
	if a > 0 {
		m.adds.Add(float64(a))
	}
	if u > 0 {
		m.updates.Add(float64(u))
	}
	if d > 0 {
		m.delete.Add(float64(d))
	}
	m.size.Set(float64(size))
}

func (m *collectionMetrics) observeTransformation(d time.Duration) {
	m.transforms.Inc()
	m.duration.Observe(d.Seconds())
}

// deleteSeries drops this collection's series when it stops. Collections that
// share a name share series; the last one to stop removes them.
func (m *collectionMetrics) deleteSeries() {
	seriesMu.Lock()
	defer seriesMu.Unlock()
	if seriesRefs[m.name]--; seriesRefs[m.name] > 0 {
		return
	}
	delete(seriesRefs, m.name)
	sizeGauge.DeleteLabelValues(m.name)
	for _, t := range []EventType{EventAdd, EventUpdate, EventDelete} {
		eventsCounter.DeleteLabelValues(m.name, t.String())
	}
	transformCounter.DeleteLabelValues(m.name)
	panicsCounter.DeleteLabelValues(m.name)
	transformDuration.DeleteLabelValues(m.name)
}
