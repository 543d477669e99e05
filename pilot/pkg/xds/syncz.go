// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc/peer"
	"k8s.io/utils/clock"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// ProxyStatus is one connected stream as /debug/syncz shows it.
type ProxyStatus struct {
	// Stream is go-control-plane's stream ID (per protocol variant).
	Stream int64 `json:"stream"`
	// Delta is true for DeltaAggregatedResources streams.
	Delta bool `json:"delta"`
	// Peer is the remote address of the stream's connection (the proxy, or
	// the last proxy or NAT in front of it): with Stream, it tells apart
	// streams that carry the same node id.
	Peer string `json:"peer,omitempty"`
	// Node is node.id; Gateway the "namespace/name" from node metadata, or
	// GatewayError when the metadata is missing.
	Node         string `json:"node"`
	Gateway      string `json:"gateway,omitempty"`
	GatewayError string `json:"gatewayError,omitempty"`
	// ProxyVersion is the node's user agent and version, and whether it is
	// below EnvoyVersionFloor.
	ProxyVersion
	// Types are per xDS type (cds, eds, lds, rds).
	Types map[string]*TypeStatus `json:"types"`
	// Refused are the parts of the Gateway's translation that the push
	// path does not serve as translated (served at their last good
	// version, or left out); empty when it is served in full.
	Refused []model.RefusedResource `json:"refused,omitempty"`
}

// TypeStatus is one type of one stream.
type TypeStatus struct {
	// Sent is the version (SotW version_info, delta system_version_info) of
	// the last response, with its nonce and time.
	Sent      string    `json:"sent,omitempty"`
	SentNonce string    `json:"sentNonce,omitempty"`
	SentAt    time.Time `json:"sentAt,omitzero"`
	// Acked is the last version the proxy accepted.
	Acked string `json:"acked,omitempty"`
	// Nacked is the last version the proxy rejected, with its error_detail
	// message, cut to MaxNackMessage bytes; cleared when a later version is
	// acked.
	Nacked      string `json:"nacked,omitempty"`
	NackMessage string `json:"nackMessage,omitempty"`
}

// tracker implements go-control-plane's server callbacks: it records what
// each stream was sent and what the proxy acked or nacked, logs and counts
// NACKs, and feeds /debug/syncz.
type tracker struct {
	log     *slog.Logger
	metrics *metrics
	clock   clock.PassiveClock

	mu      sync.Mutex
	streams map[streamKey]*streamState
	// refused returns what the push path refused of a Gateway
	// (servingStatus.get, whose lock never waits for t.mu); nil: nothing.
	refused func(gateway string) []model.RefusedResource

	// belowFloor counts, per Gateway, the open streams whose proxy is below
	// EnvoyVersionFloor (the gauge's source, so a Gateway's series is
	// deleted at 0).
	belowFloor map[string]int
}

type streamKey struct {
	id    int64
	delta bool
}

type streamState struct {
	status ProxyStatus
	// nodeSeen is set once the stream's node was recorded (its first
	// request carries it).
	nodeSeen bool
	// nonces are, per type, the version sent with the latest nonce.
	nonces map[string]nonceVersion
}

type nonceVersion struct{ nonce, version string }

var _ serverv3.Callbacks = (*tracker)(nil)

func newTracker(log *slog.Logger, m *metrics, c clock.PassiveClock) *tracker {
	return &tracker{log: log, metrics: m, clock: c, streams: map[streamKey]*streamState{}, belowFloor: map[string]int{}}
}

// proxiesOf counts the open streams whose node names one of gateways.
func (t *tracker) proxiesOf(gateways map[string]bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.streams {
		if gateways[s.status.Gateway] {
			n++
		}
	}
	return n
}

func (t *tracker) open(k streamKey, peer string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.streams[k] = &streamState{
		status: ProxyStatus{Stream: k.id, Delta: k.delta, Peer: peer, Types: map[string]*TypeStatus{}},
		nonces: map[string]nonceVersion{},
	}
	t.metrics.streams.Inc()
}

func (t *tracker) closed(k streamKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.streams[k]; ok {
		delete(t.streams, k)
		t.metrics.streams.Dec()
		if s.status.BelowFloor {
			t.belowFloorAdd(s.status.Gateway, -1)
		}
	}
}

// request records a request: the node on the first one, then an ACK or a
// NACK when it answers the latest response of its type. ackVersion is the
// version the proxy reports (SotW); for delta it is "" and the version sent
// with the nonce counts.
func (t *tracker) request(k streamKey, node *corev3.Node, typeURL, nonce, ackVersion string, errDetail string, nack bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.streams[k]
	if s == nil {
		return
	}
	if !s.nodeSeen && node != nil {
		t.recordNode(k, s, node)
	}
	kd, ok := kindOf(typeURL)
	if !ok || nonce == "" {
		return
	}
	sent, ok := s.nonces[typeURL]
	if !ok || sent.nonce != nonce {
		return // stale nonce: not about the latest response
	}
	ts := s.typeStatus(kd)
	if nack {
		msg := truncateMessage(errDetail)
		ts.Nacked, ts.NackMessage = sent.version, msg
		t.metrics.nacks.WithLabelValues(kd.String()).Inc()
		t.log.Warn("xds: proxy rejected configuration (NACK)", "node", s.status.Node, "gateway", s.status.Gateway,
			"type", kd.String(), "version", sent.version, "nonce", nonce, "delta", k.delta, "stream", k.id,
			"peer", s.status.Peer, "error", msg)
		return
	}
	if ackVersion == "" {
		ackVersion = sent.version
	}
	ts.Acked = ackVersion
	if ts.Nacked != "" && ackVersion == sent.version {
		ts.Nacked, ts.NackMessage = "", ""
	}
}

// recordNode records the stream's node: its id, Gateway and version. A
// proxy below EnvoyVersionFloor is served, logged once (here: a stream
// carries its node once) and counted per Gateway while its stream is open.
// t.mu is held.
func (t *tracker) recordNode(k streamKey, s *streamState, node *corev3.Node) {
	s.nodeSeen = true
	s.status.Node = node.GetId()
	if gw, err := gatewayOf(node); err != nil {
		s.status.GatewayError = err.Error()
	} else {
		s.status.Gateway = gw
	}
	s.status.ProxyVersion = proxyVersionOf(node)
	if !s.status.BelowFloor {
		return
	}
	t.belowFloorAdd(s.status.Gateway, 1)
	t.log.Warn("xds: proxy's Envoy is older than the version floor: it is served, but ignores "+
		"OverrideHost.selected_host_key, so the endpoint it served is never reported to the EPP",
		"node", s.status.Node, "gateway", s.status.Gateway, "version", orNone(s.status.Version),
		"floor", EnvoyVersionFloor.String(), "delta", k.delta)
}

// belowFloorAdd moves gateway's count of proxies below the floor by d and
// sets the gauge; at 0 the Gateway's series is deleted.
func (t *tracker) belowFloorAdd(gateway string, d int) {
	n := t.belowFloor[gateway] + d
	if n <= 0 {
		delete(t.belowFloor, gateway)
		t.metrics.belowFloor.DeleteLabelValues(gateway)
		return
	}
	t.belowFloor[gateway] = n
	t.metrics.belowFloor.WithLabelValues(gateway).Set(float64(n))
}

func orNone(s string) string {
	if s == "" {
		return "(none sent)"
	}
	return s
}

func (t *tracker) response(k streamKey, typeURL, nonce, version string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.streams[k]
	kd, ok := kindOf(typeURL)
	if s == nil || !ok {
		return
	}
	s.nonces[typeURL] = nonceVersion{nonce: nonce, version: version}
	ts := s.typeStatus(kd)
	ts.Sent, ts.SentNonce, ts.SentAt = version, nonce, t.clock.Now()
	t.metrics.responses.WithLabelValues(kd.String()).Inc()
}

func (s *streamState) typeStatus(k kind) *TypeStatus {
	ts := s.status.Types[k.String()]
	if ts == nil {
		ts = &TypeStatus{}
		s.status.Types[k.String()] = ts
	}
	return ts
}

// Status returns a copy of every open stream's status, sorted by Gateway,
// node and stream.
func (t *tracker) Status() []ProxyStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ProxyStatus, 0, len(t.streams))
	for _, s := range t.streams {
		p := s.status
		p.Types = make(map[string]*TypeStatus, len(s.status.Types))
		for k, v := range s.status.Types {
			c := *v
			p.Types[k] = &c
		}
		if t.refused != nil && p.Gateway != "" {
			p.Refused = t.refused(p.Gateway)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Gateway != b.Gateway {
			return a.Gateway < b.Gateway
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		if a.Delta != b.Delta {
			return !a.Delta
		}
		return a.Stream < b.Stream
	})
	return out
}

// peerAddress is the remote address of the stream's connection, or "".
func peerAddress(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// go-control-plane callbacks.

func (t *tracker) OnStreamOpen(ctx context.Context, id int64, _ string) error {
	t.open(streamKey{id: id}, peerAddress(ctx))
	return nil
}
func (t *tracker) OnStreamClosed(id int64, _ *corev3.Node) { t.closed(streamKey{id: id}) }
func (t *tracker) OnDeltaStreamOpen(ctx context.Context, id int64, _ string) error {
	t.open(streamKey{id: id, delta: true}, peerAddress(ctx))
	return nil
}
func (t *tracker) OnDeltaStreamClosed(id int64, _ *corev3.Node) {
	t.closed(streamKey{id: id, delta: true})
}

func (t *tracker) OnStreamRequest(id int64, req *discoveryv3.DiscoveryRequest) error {
	t.request(streamKey{id: id}, req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetVersionInfo(),
		req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	return nil
}

func (t *tracker) OnStreamResponse(_ context.Context, id int64, req *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
	t.response(streamKey{id: id}, req.GetTypeUrl(), resp.GetNonce(), resp.GetVersionInfo())
}

func (t *tracker) OnStreamDeltaRequest(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
	t.request(streamKey{id: id, delta: true}, req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), "",
		req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	return nil
}

func (t *tracker) OnStreamDeltaResponse(id int64, req *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
	t.response(streamKey{id: id, delta: true}, req.GetTypeUrl(), resp.GetNonce(), resp.GetSystemVersionInfo())
}

func (t *tracker) OnFetchRequest(context.Context, *discoveryv3.DiscoveryRequest) error           { return nil }
func (t *tracker) OnFetchResponse(*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse) {}
