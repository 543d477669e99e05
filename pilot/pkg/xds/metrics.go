// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import "github.com/prometheus/client_golang/prometheus"

// metrics are one Server's Prometheus metrics. Names:
//
//	infermesh_xds_nacks_total{type}              counter: NACKs received (type: cds|eds|lds|rds)
//	infermesh_xds_responses_total{type}          counter: responses sent
//	infermesh_xds_rejected_total{kind}           counter: push-path rejections (kind: gateway|endpoints): a set that failed translation or validation, not served as translated (a Gateway's valid parts are still served)
//	infermesh_xds_pushes_total                   counter: push-path runs that published
//	infermesh_xds_push_duration_seconds          histogram: one push-path run (validate, marshal, publish), seconds
//	infermesh_xds_connected_streams              gauge: open ADS streams
//	infermesh_xds_dropped_responses_total        counter: responses dropped on a full stream channel (must stay 0)
//	infermesh_xds_proxies_below_version_floor{gateway}  gauge: open streams of Envoys older than EnvoyVersionFloor (served, but the EPP never learns the served endpoint)
//	infermesh_xds_gateway_invalid_resources{gateway}    gauge: parts of the Gateway's translation not served as translated (refused by validation: served at their last good version or left out); no series when none
type metrics struct {
	nacks     *prometheus.CounterVec
	responses *prometheus.CounterVec
	rejected  *prometheus.CounterVec
	pushes    prometheus.Counter
	pushTime  prometheus.Histogram
	streams   prometheus.Gauge
	dropped   prometheus.Counter
	// belowFloor is set by the tracker from its own counts.
	belowFloor *prometheus.GaugeVec
	// invalid is set by servingStatus.
	invalid *prometheus.GaugeVec
}

func newMetrics() *metrics {
	return &metrics{
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infermesh_xds_nacks_total", Help: "xDS NACKs received from proxies, by type (cds, eds, lds, rds).",
		}, []string{"type"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infermesh_xds_responses_total", Help: "xDS responses sent to proxies, by type (cds, eds, lds, rds).",
		}, []string{"type"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infermesh_xds_rejected_total", Help: "Resource sets the push path refused to serve (failed translation or validation), by kind (gateway, endpoints).",
		}, []string{"kind"}),
		pushes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "infermesh_xds_pushes_total", Help: "Push-path runs (coalesced changes validated and published).",
		}),
		pushTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "infermesh_xds_push_duration_seconds", Help: "Duration of one push-path run, in seconds.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10),
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "infermesh_xds_connected_streams", Help: "Open ADS streams (state of the world and delta).",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "infermesh_xds_dropped_responses_total", Help: "Responses dropped because a stream's channel was full (a bug if not 0).",
		}),
		belowFloor: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "infermesh_xds_proxies_below_version_floor",
			Help: "Open ADS streams of Envoys older than the version floor, by Gateway: they are served, but never report the served endpoint to the EPP.",
		}, []string{"gateway"}),
		invalid: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "infermesh_xds_gateway_invalid_resources",
			Help: "Parts of a Gateway's translated configuration refused by validation (served at their last good version, or left out), by Gateway; absent when the Gateway is served in full.",
		}, []string{"gateway"}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.nacks, m.responses, m.rejected, m.pushes, m.pushTime, m.streams, m.dropped, m.belowFloor, m.invalid} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
