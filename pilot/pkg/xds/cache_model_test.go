// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
)

// The Cache's EDS and SDS answers against a from-scratch computation.
//
// runCacheModel drives a Cache with random publishes (assignments and
// secrets added, changed, removed; Gateways added, removed, changing their
// EDS and SDS names and warm keys) and random streams, SotW and delta,
// handled as go-control-plane's stream servers handle them (modelStream:
// the same calls in the same order, on the library's own Subscription
// type, as in pkg/server/sotw/v3 processADS and send, and
// pkg/server/delta/v3 processDelta): first requests, responses taken,
// ACKs, NACKs, subscription changes, stale nonces, reconnects with
// initial_resource_versions, streams ending, and publishes landing
// between a request's arrival and its watch. After every call into the
// Cache, every response it wrote must be what refAnswer (the whole set,
// from scratch) gives for that watch at that moment, every taken response
// must leave the stream's returned map equal to what it held plus what was
// sent, and after every step every parked watch must be one refAnswer has
// nothing for.

// Names of the model's world.
var (
	modelGateways = []string{"ns/g0", "ns/g1", "ns/g2"}
	modelEDS      = []string{"e00", "e01", "e02", "e03", "e04", "e05", "e06", "e07", "e08", "e09"}
	modelSDS      = []string{"s0", "s1", "s2", "s3"}
)

func modelNames(k kind) []string {
	if k == kindSecret {
		return modelSDS
	}
	return modelEDS
}

type cacheModel struct {
	t    *testing.T
	rng  *rand.Rand
	seed uint64
	step int
	what string

	c *Cache
	// gws and entries are what was published.
	gws     map[string]*gatewaySnapshot
	entries [numKinds]map[string]*entry
	streams []*modelStream
	nextID  int64
	// byReq finds the stream and kind of a watch's request.
	byReq map[any]*modelKind
	// closed keeps the last holdings of ended delta streams, for
	// reconnects with initial_resource_versions.
	closed []map[string]string
	// counts of what happened, for the final log line.
	responses, taken, checks int
}

// modelStream is one ADS stream as go-control-plane's server keeps it.
type modelStream struct {
	id      int64
	delta   bool
	gateway string
	node    *corev3.Node
	open    bool
	nonce   int
	sotwCh  chan cachev3.Response
	deltaCh chan cachev3.DeltaResponse
	// pending are responses written by the Cache and not yet taken, in
	// order, each checked when it was written.
	pending []pendingResponse
	kinds   [numKinds]*modelKind
}

func (s *modelStream) key() streamKey { return streamKey{id: s.id, delta: s.delta} }

// modelKind is the server's state for one type of a stream: the
// subscription, the last nonce sent, the current watch.
type modelKind struct {
	s      *modelStream
	kind   kind
	sub    stream.Subscription
	nonce  string
	cancel func()
	// req is the current watch's request; answered once the Cache wrote a
	// response to it.
	req      any
	answered bool
	// names are the SotW subscription's names as last requested; version
	// the last version the proxy accepted.
	names   []string
	version string
	// sent is the version of the last response taken, waiting for an ACK.
	sent      string
	lastNonce string
}

type pendingResponse struct {
	kind  kind
	sotw  cachev3.Response
	delta cachev3.DeltaResponse
	// want are the versions the response sends, by name (under the warm
	// keys), and removed the names it removes.
	want    map[string]string
	removed []string
}

func newCacheModel(t *testing.T, seed uint64) *cacheModel {
	m := &cacheModel{
		t: t, rng: rand.New(rand.NewPCG(seed, 17)), seed: seed,
		c:     newCache(slog.New(slog.NewTextHandler(io.Discard, nil)), newMetrics()),
		gws:   map[string]*gatewaySnapshot{},
		byReq: map[any]*modelKind{},
	}
	for _, k := range sharedKinds {
		m.entries[k] = map[string]*entry{}
	}
	return m
}

func (m *cacheModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d step %d (%s): %s", m.seed, m.step, m.what, fmt.Sprintf(format, args...))
}

// run makes steps random steps.
func (m *cacheModel) run(steps int) {
	m.what = "initial publish"
	m.publish(true)
	for m.step = 1; m.step <= steps; m.step++ {
		m.randomStep()
		m.checkParked()
	}
	m.t.Logf("seed %d: %d steps, %d responses checked, %d taken, %d parked watches checked",
		m.seed, steps, m.responses, m.taken, m.checks)
}

func (m *cacheModel) randomStep() {
	live := m.liveStreams()
	r := m.rng.IntN(100)
	switch {
	case len(live) == 0 || (r >= 25 && r < 33 && len(live) < 7):
		m.openStream()
	case r < 25:
		m.what = "publish"
		m.publish(false)
	default:
		m.streamStep(live[m.rng.IntN(len(live))])
	}
}

func (m *cacheModel) liveStreams() []*modelStream {
	var out []*modelStream
	for _, s := range m.streams {
		if s.open {
			out = append(out, s)
		}
	}
	return out
}

// streamStep makes one random step of stream s.
func (m *cacheModel) streamStep(s *modelStream) {
	k := sharedKinds[m.rng.IntN(len(sharedKinds))]
	mk := s.kinds[k]
	r := m.rng.IntN(100)
	switch {
	case r < 35 && len(s.pending) > 0:
		m.what = fmt.Sprintf("stream %d takes a response", s.id)
		m.take(s)
	case r < 60 && mk != nil && mk.sent != "":
		m.what = fmt.Sprintf("stream %d ACKs %s", s.id, k)
		m.request(s, k, m.ack(mk, false), m.maybePublishes(5))
	case r < 66 && mk != nil && mk.sent != "":
		m.what = fmt.Sprintf("stream %d NACKs %s", s.id, k)
		m.request(s, k, m.ack(mk, true), nil)
	case r < 76:
		m.what = fmt.Sprintf("stream %d changes its %s subscription", s.id, k)
		m.request(s, k, m.resubscribe(s, mk, k), m.maybePublishes(4))
	case r < 80 && mk != nil && !s.delta && mk.lastNonce != "":
		m.what = fmt.Sprintf("stream %d sends a stale %s request", s.id, k)
		req := m.ack(mk, false).(*discoveryv3.DiscoveryRequest)
		req.ResponseNonce = "stale-" + mk.lastNonce
		m.request(s, k, req, nil)
	case r < 84:
		m.what = fmt.Sprintf("stream %d ends", s.id)
		m.closeStream(s)
	default:
		m.what = "publish"
		m.publish(false)
	}
}

// maybePublishes is, one time in n, publishes.
func (m *cacheModel) maybePublishes(n int) func() {
	if m.rng.IntN(n) != 0 {
		return nil
	}
	return m.publishes
}

// publish publishes a random change (everything on the first).
func (m *cacheModel) publish(first bool) {
	u := newUpdate()
	for _, k := range sharedKinds {
		names := modelNames(k)
		if !first {
			names = nil
			for range 1 + m.rng.IntN(3) {
				names = append(names, modelNames(k)[m.rng.IntN(len(modelNames(k)))])
			}
		}
		for _, name := range names {
			if !first && m.rng.IntN(8) == 0 {
				u.sharedOf(k)[name] = nil
				continue
			}
			// Few contents, so versions come back (A, B, A).
			u.sharedOf(k)[name] = entryOf(k, name, fmt.Appendf(nil, "%s-%d", name, m.rng.IntN(3)))
		}
	}
	for _, key := range modelGateways {
		if !first && m.rng.IntN(3) != 0 {
			continue
		}
		old := m.gws[key]
		switch r := m.rng.IntN(10); {
		case old != nil && r == 0:
			u.gateways[key] = nil
		case old == nil && r < 3 && !first:
			// stays away
		default:
			u.gateways[key] = m.changeGateway(key, old)
		}
	}
	m.publishUpdate(u)
}

func (m *cacheModel) publishUpdate(u update) {
	m.apply(u)
	m.c.publish(u)
	m.drain()
}

// changeGateway is a new snapshot of Gateway key: names added or removed,
// warm keys changed, or the same lists (as the push path keeps them).
func (m *cacheModel) changeGateway(key string, old *gatewaySnapshot) *gatewaySnapshot {
	snap := &gatewaySnapshot{key: key}
	if old != nil {
		snap.edsNames, snap.sdsNames, snap.warm = old.edsNames, old.sdsNames, old.warm
	}
	if old == nil || m.rng.IntN(2) == 0 {
		snap.edsNames = m.subset(modelEDS, old.sharedNamesOrNil(kindEndpoint))
	}
	if old == nil || m.rng.IntN(3) == 0 {
		snap.sdsNames = m.subset(modelSDS, old.sharedNamesOrNil(kindSecret))
	}
	if old == nil || !sameList(snap.edsNames, old.edsNames) || m.rng.IntN(2) == 0 {
		warm := warmKeys{}
		for _, n := range snap.edsNames {
			if k, ok := old.warmOrNil()[n]; ok && m.rng.IntN(4) != 0 {
				warm[n] = k
			} else if m.rng.IntN(6) != 0 {
				warm[n] = fmt.Sprintf("c%d", m.rng.IntN(3))
			}
		}
		snap.warm[kindEndpoint] = warm
	}
	return snap
}

func (s *gatewaySnapshot) sharedNamesOrNil(k kind) []string {
	if s == nil {
		return nil
	}
	return s.sharedNames(k)
}

func (s *gatewaySnapshot) warmOrNil() warmKeys {
	if s == nil {
		return nil
	}
	return s.warm[kindEndpoint]
}

// subset is a random sorted subset of all, near old.
func (m *cacheModel) subset(all, old []string) []string {
	var out []string
	for _, n := range all {
		_, had := slices.BinarySearch(old, n)
		if (had && m.rng.IntN(5) != 0) || (!had && m.rng.IntN(3) == 0) {
			out = append(out, n)
		}
	}
	return out
}

func (m *cacheModel) apply(u update) {
	for key, snap := range u.gateways {
		if snap == nil {
			delete(m.gws, key)
		} else {
			m.gws[key] = snap
		}
	}
	for _, k := range sharedKinds {
		for n, e := range u.sharedOf(k) {
			if e == nil {
				delete(m.entries[k], n)
			} else {
				m.entries[k][n] = e
			}
		}
	}
}

// openStream opens a stream of a random Gateway (sometimes one never
// published) and sends its first requests.
func (m *cacheModel) openStream() {
	m.nextID++
	gw := modelGateways[m.rng.IntN(len(modelGateways))]
	if m.rng.IntN(10) == 0 {
		gw = "ns/none"
	}
	ns, name, _ := strings.Cut(gw, "/")
	s := &modelStream{
		id: m.nextID, delta: m.rng.IntN(2) == 0, gateway: gw, node: node(fmt.Sprint("proxy-", m.nextID), ns, name), open: true,
		sotwCh: make(chan cachev3.Response, 16), deltaCh: make(chan cachev3.DeltaResponse, 16),
	}
	m.streams = append(m.streams, s)
	for _, k := range sharedKinds {
		if k == kindSecret && m.rng.IntN(3) == 0 {
			continue
		}
		m.what = fmt.Sprintf("stream %d (delta %v, %s) opens %s", s.id, s.delta, gw, k)
		m.request(s, k, m.firstRequest(s, k), nil)
	}
}

// firstRequest is a stream's first request of kind k: the Gateway's names
// as Envoy subscribes, or a random set, or a wildcard; on delta sometimes
// a reconnect carrying what an ended stream held.
func (m *cacheModel) firstRequest(s *modelStream, k kind) any {
	names := m.requestNames(s, k)
	if !s.delta {
		return &discoveryv3.DiscoveryRequest{Node: s.node, TypeUrl: k.typeURL(), ResourceNames: names}
	}
	req := &discoveryv3.DeltaDiscoveryRequest{Node: s.node, TypeUrl: k.typeURL(), ResourceNamesSubscribe: names}
	if k == kindEndpoint && len(m.closed) > 0 && m.rng.IntN(2) == 0 {
		init := maps.Clone(m.closed[m.rng.IntN(len(m.closed))])
		for n := range init {
			if m.rng.IntN(5) == 0 {
				init[n] = "stale"
			}
		}
		if m.rng.IntN(3) == 0 {
			init["e-gone"] = "x"
		}
		req.InitialResourceVersions = init
	}
	return req
}

func (m *cacheModel) requestNames(s *modelStream, k kind) []string {
	switch r := m.rng.IntN(10); {
	case r == 0:
		return nil // legacy wildcard
	case r == 1:
		return []string{"*"}
	case r < 4:
		return m.subset(modelNames(k), nil)
	}
	if snap := m.gws[s.gateway]; snap != nil {
		return slices.Clone(snap.sharedNames(k))
	}
	return m.subset(modelNames(k), nil)
}

// ack is the proxy's next request for mk's kind after the last response
// it took: an ACK, or with nack a NACK.
func (m *cacheModel) ack(mk *modelKind, nack bool) any {
	s := mk.s
	var detail *status.Status
	if nack {
		detail = &status.Status{Message: "rejected by the model"}
	}
	if s.delta {
		return &discoveryv3.DeltaDiscoveryRequest{TypeUrl: mk.kind.typeURL(), ResponseNonce: mk.lastNonce, ErrorDetail: detail}
	}
	version := mk.sent
	if nack {
		version = mk.version
	}
	return &discoveryv3.DiscoveryRequest{TypeUrl: mk.kind.typeURL(), ResponseNonce: mk.lastNonce, VersionInfo: version,
		ResourceNames: slices.Clone(mk.names), ErrorDetail: detail}
}

// resubscribe is a request changing the subscription of kind k.
func (m *cacheModel) resubscribe(s *modelStream, mk *modelKind, k kind) any {
	if mk == nil {
		return m.firstRequest(s, k)
	}
	if !s.delta {
		return &discoveryv3.DiscoveryRequest{TypeUrl: k.typeURL(), ResponseNonce: mk.lastNonce, VersionInfo: mk.version,
			ResourceNames: m.requestNames(s, k)}
	}
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: k.typeURL(), ResponseNonce: mk.lastNonce}
	all := append(slices.Clone(modelNames(k)), "*")
	for range 1 + m.rng.IntN(3) {
		n := all[m.rng.IntN(len(all))]
		if m.rng.IntN(2) == 0 {
			req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, n)
		} else {
			req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, n)
		}
	}
	return req
}
