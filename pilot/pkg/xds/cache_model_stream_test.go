// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"maps"
	"slices"
	"sort"
	"strconv"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
)

// request handles one request of kind k on stream s as go-control-plane
// does; mid, when not nil, runs where another goroutine's publish could
// land: after the request arrived and before its watch is cancelled.
func (m *cacheModel) request(s *modelStream, k kind, req any, mid func()) {
	if s.delta {
		m.deltaRequest(s, k, req.(*discoveryv3.DeltaDiscoveryRequest), mid)
	} else {
		m.sotwRequest(s, k, req.(*discoveryv3.DiscoveryRequest), mid)
	}
}

// sotwRequest: pkg/server/sotw/v3 processADS. The callbacks see the request
// first; a request whose nonce is not the last one sent is ignored; the
// watch is cancelled, pending responses of other types are sent and those
// of this type dropped (processAllExcept), then the subscription is updated
// and a new watch opened.
func (m *cacheModel) sotwRequest(s *modelStream, k kind, req *discoveryv3.DiscoveryRequest, mid func()) {
	req.Node = s.node
	m.c.noteRequest(s.key(), req)
	mk := s.kinds[k]
	var sub stream.Subscription
	if mk != nil {
		if mk.nonce != "" && req.GetResponseNonce() != mk.nonce {
			return
		}
		if mid != nil {
			mid()
		}
		mk.cancel()
		m.drain()
		pending := s.pending
		s.pending = nil
		for _, p := range pending {
			if p.kind != k {
				m.takeResponse(s, p)
			}
		}
		sub = mk.sub
		sub.SetResourceSubscription(req.GetResourceNames())
	} else {
		mk = &modelKind{s: s, kind: k}
		s.kinds[k] = mk
		sub = stream.NewSotwSubscription(req.GetResourceNames(), true)
	}
	mk.names = slices.Clone(req.GetResourceNames())
	if req.GetErrorDetail() == nil {
		mk.version = req.GetVersionInfo()
	}
	mk.sent = ""
	cancel, err := m.c.CreateWatch(req, sub, s.sotwCh)
	if err != nil {
		m.fatalf("CreateWatch: %v", err)
	}
	// The server's new watch starts without a nonce (addWatch).
	mk.sub, mk.cancel, mk.req, mk.answered, mk.nonce = sub, cancel, req, false, ""
	m.byReq[req] = mk
	m.drain()
}

// deltaRequest: pkg/server/delta/v3 processDelta. Every pending response
// is sent first (processAll), then the callbacks see the request, the
// watch is cancelled, the subscription updated and a new watch opened.
func (m *cacheModel) deltaRequest(s *modelStream, k kind, req *discoveryv3.DeltaDiscoveryRequest, mid func()) {
	for len(s.pending) > 0 {
		m.take(s)
	}
	req.Node = s.node
	m.c.noteRequest(s.key(), req)
	if mid != nil {
		mid()
	}
	mk := s.kinds[k]
	var sub stream.Subscription
	if mk == nil {
		mk = &modelKind{s: s, kind: k}
		s.kinds[k] = mk
		sub = stream.NewDeltaSubscription(req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe(), req.GetInitialResourceVersions(), true)
	} else {
		mk.cancel()
		m.drain()
		sub = mk.sub
		sub.UpdateResourceSubscriptions(req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe())
	}
	mk.sent = ""
	cancel, err := m.c.CreateDeltaWatch(req, sub, s.deltaCh)
	if err != nil {
		m.fatalf("CreateDeltaWatch: %v", err)
	}
	mk.sub, mk.cancel, mk.req, mk.answered = sub, cancel, req, false
	m.byReq[req] = mk
	m.drain()
}

// publishes are one or two publishes from another goroutine (two can
// change a name and change it back).
func (m *cacheModel) publishes() {
	for range 1 + m.rng.IntN(2) {
		m.publish(false)
	}
}

// take sends stream s's oldest pending response.
func (m *cacheModel) take(s *modelStream) {
	p := s.pending[0]
	s.pending = s.pending[1:]
	m.takeResponse(s, p)
}

// takeResponse sends p as the servers do (sotw send, delta process): the
// response's next-version map becomes the subscription's returned map.
// That map must be what the stream held plus what p sent.
func (m *cacheModel) takeResponse(s *modelStream, p pendingResponse) {
	mk := s.kinds[p.kind]
	want := maps.Clone(mk.sub.ReturnedResources())
	if want == nil {
		want = map[string]string{}
	}
	maps.Copy(want, p.want)
	for _, n := range p.removed {
		delete(want, n)
	}
	s.nonce++
	mk.lastNonce = strconv.Itoa(s.nonce)
	var next map[string]string
	if s.delta {
		r, _ := p.delta.GetDeltaDiscoveryResponse()
		next = p.delta.GetNextVersionMap()
		mk.sent = r.GetSystemVersionInfo()
	} else {
		r, _ := p.sotw.GetDiscoveryResponse()
		next = p.sotw.GetReturnedResources()
		mk.nonce, mk.sent = mk.lastNonce, r.GetVersionInfo()
	}
	mk.sub.SetReturnedResources(next)
	m.taken++
	if !maps.Equal(next, want) {
		m.fatalf("stream %d %s: after the response the stream holds %v, want %v", s.id, p.kind, next, want)
	}
	m.drain()
}

// closeStream ends s: go-control-plane cancels each type's watch, then the
// callbacks see the end.
func (m *cacheModel) closeStream(s *modelStream) {
	for _, mk := range s.kinds {
		if mk != nil {
			mk.cancel()
		}
	}
	m.c.closeStream(s.key())
	s.open = false
	if mk := s.kinds[kindEndpoint]; s.delta && mk != nil {
		m.closed = append(m.closed, maps.Clone(mk.sub.ReturnedResources()))
	}
	m.drain()
}

// drain checks every response the Cache wrote since the last call and
// queues it on its stream.
func (m *cacheModel) drain() {
	for _, s := range m.streams {
		for {
			var p pendingResponse
			select {
			case r := <-s.sotwCh:
				p.sotw = r
				m.checkSotw(s, r, &p)
			case r := <-s.deltaCh:
				p.delta = r
				m.checkDelta(s, r, &p)
			default:
			}
			if p.sotw == nil && p.delta == nil {
				break
			}
			m.responses++
			s.pending = append(s.pending, p)
		}
	}
}

// watchOf is the stream kind whose current watch req is; a response must
// answer a current, unanswered watch.
func (m *cacheModel) watchOf(s *modelStream, req any) *modelKind {
	mk := m.byReq[req]
	if mk == nil || mk.s != s || mk.req != req || mk.answered {
		m.fatalf("stream %d: a response to a request that is not its open watch", s.id)
	}
	mk.answered = true
	return mk
}

func (m *cacheModel) checkSotw(s *modelStream, r interface {
	GetDiscoveryResponse() (*discoveryv3.DiscoveryResponse, error)
	GetRequest() *discoveryv3.DiscoveryRequest
}, p *pendingResponse) {
	mk := m.watchOf(s, r.GetRequest())
	p.kind = mk.kind
	ref := m.refAnswer(mk)
	dr, _ := r.GetDiscoveryResponse()
	if ref == nil {
		m.fatalf("stream %d sotw %s: got %s, the full computation sends nothing", s.id, mk.kind, sotwNames(dr))
	}
	got := sotwNames(dr)
	if !slices.Equal(got, ref.names) || dr.GetVersionInfo() != ref.version {
		m.fatalf("stream %d sotw %s: got %v version %s, the full computation sends %v version %s",
			s.id, mk.kind, got, dr.GetVersionInfo(), ref.names, ref.version)
	}
	for i, a := range dr.GetResources() {
		if a != m.entries[mk.kind][ref.names[i]].any {
			m.fatalf("stream %d sotw %s: %s is not the published entry", s.id, mk.kind, ref.names[i])
		}
	}
	p.want = ref.versions
}

func (m *cacheModel) checkDelta(s *modelStream, r interface {
	GetDeltaDiscoveryResponse() (*discoveryv3.DeltaDiscoveryResponse, error)
	GetDeltaRequest() *discoveryv3.DeltaDiscoveryRequest
}, p *pendingResponse) {
	mk := m.watchOf(s, r.GetDeltaRequest())
	p.kind = mk.kind
	ref := m.refAnswer(mk)
	dr, _ := r.GetDeltaDiscoveryResponse()
	got := map[string]string{}
	var names []string
	for _, res := range dr.GetResources() {
		names = append(names, res.GetName())
		got[res.GetName()] = res.GetVersion()
		if e := m.entries[mk.kind][res.GetName()]; e == nil || res.GetResource() != e.any {
			m.fatalf("stream %d delta %s: %s is not the published entry", s.id, mk.kind, res.GetName())
		}
	}
	if ref == nil {
		m.fatalf("stream %d delta %s: got %v removed %v, the full computation sends nothing", s.id, mk.kind, names, dr.GetRemovedResources())
	}
	if !slices.Equal(names, ref.names) || !maps.Equal(got, ref.versions) || !slices.Equal(dr.GetRemovedResources(), ref.removed) ||
		dr.GetSystemVersionInfo() != ref.version {
		m.fatalf("stream %d delta %s: got %v removed %v version %s, the full computation sends %v removed %v version %s",
			s.id, mk.kind, got, dr.GetRemovedResources(), dr.GetSystemVersionInfo(), ref.versions, ref.removed, ref.version)
	}
	p.want, p.removed = ref.versions, ref.removed
}

func sotwNames(r *discoveryv3.DiscoveryResponse) []string {
	var out []string
	for _, a := range r.GetResources() {
		// Entries' Anys are serialized by entryOf; the model's contents
		// start with the name.
		v := string(a.GetValue())
		if i := len(v) - 2; i > 0 {
			out = append(out, v[:i])
		}
	}
	return out
}

// refAnswer is the response the whole set gives, from scratch, to mk's
// open watch, given what the stream holds now; nil for none. The rules
// are the Cache's (fullPlan): EDS and SDS send the desired names whose
// version under the warm keys differs from what the stream holds; delta
// also removes what it holds and is not desired, and answers its first
// request even when empty. The version is the sum of memberHash over the
// Gateway's whole set.
func (m *cacheModel) refAnswer(mk *modelKind) *refResponse {
	snap := m.gws[mk.s.gateway]
	if snap == nil {
		return nil
	}
	k := mk.kind
	returned := mk.sub.ReturnedResources()
	subscribed := mk.sub.SubscribedResources()
	ref := &refResponse{versions: map[string]string{}}
	want := map[string]bool{}
	var sum uint64
	count := 0
	for _, n := range snap.sharedNames(k) {
		e := m.entries[k][n]
		if e == nil {
			continue
		}
		key, hasKey := snap.warm[k][n]
		sum += memberHash(n, e.version, key, hasKey)
		count++
		if _, ok := subscribed[n]; !ok && !mk.sub.IsWildcard() {
			continue
		}
		v := e.version
		if hasKey {
			v += "/" + key
		}
		want[n] = true
		if returned[n] != v || !hasName(returned, n) {
			ref.names = append(ref.names, n)
			ref.versions[n] = v
		}
	}
	ref.version = "empty"
	if count > 0 {
		ref.version = hashHex(sum)
	}
	if mk.s.delta {
		for n := range returned {
			if !want[n] {
				ref.removed = append(ref.removed, n)
			}
		}
		sort.Strings(ref.removed)
	}
	first := nonceOf(mk.req) == ""
	if len(ref.names) == 0 && len(ref.removed) == 0 && (!mk.s.delta || !first) {
		return nil
	}
	return ref
}

type refResponse struct {
	names    []string
	versions map[string]string
	removed  []string
	version  string
}

func hasName(m map[string]string, n string) bool {
	_, ok := m[n]
	return ok
}

func nonceOf(req any) string {
	if r, ok := req.(*discoveryv3.DiscoveryRequest); ok {
		return r.GetResponseNonce()
	}
	return req.(*discoveryv3.DeltaDiscoveryRequest).GetResponseNonce()
}

// checkParked: every open, unanswered watch must be one the whole set has
// nothing for.
func (m *cacheModel) checkParked() {
	for _, s := range m.liveStreams() {
		for _, mk := range s.kinds {
			if mk == nil || mk.answered {
				continue
			}
			m.checks++
			if ref := m.refAnswer(mk); ref != nil {
				m.fatalf("stream %d (delta %v, %s) %s: parked, but the full computation sends %v removed %v",
					s.id, s.delta, s.gateway, mk.kind, ref.names, ref.removed)
			}
		}
	}
}

// TestCacheAnswersAsFullComputation runs the model at fixed seeds.
func TestCacheAnswersAsFullComputation(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		newCacheModel(t, seed).run(1500)
	}
}

func FuzzCacheAnswers(f *testing.F) {
	f.Add(uint64(1), uint16(300))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint16) {
		newCacheModel(t, seed).run(int(steps))
	})
}

// TestDeltaResponseTakenAfterWatchReopened: a publish answers a delta
// stream's parked EDS watch (assignment version B) just as the proxy's next
// request arrives; a second publish puts version A back; the request's new
// watch compares what the stream held (A) with A and parks; then the
// server sends the B response. The stream now holds B while A is desired,
// so taking that response must answer the new watch with A.
func TestDeltaResponseTakenAfterWatchReopened(t *testing.T) {
	m := newCacheModel(t, 1)
	m.what = "setup"
	entryA := entryOf(kindEndpoint, "e00", []byte("e00-0"))
	u := newUpdate()
	u.gateways["ns/g0"] = &gatewaySnapshot{key: "ns/g0", edsNames: []string{"e00"}}
	u.eds["e00"] = entryA
	m.publishUpdate(u)
	s := &modelStream{id: 1, delta: true, gateway: "ns/g0", node: node("proxy", "ns", "g0"), open: true,
		sotwCh: make(chan cachev3.Response, 16), deltaCh: make(chan cachev3.DeltaResponse, 16)}
	m.streams = append(m.streams, s)
	m.request(s, kindEndpoint, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{"e00"}}, nil)
	m.take(s)
	mk := s.kinds[kindEndpoint]
	m.request(s, kindEndpoint, m.ack(mk, false), nil)
	if mk.answered {
		t.Fatal("the ACK's watch was answered; want it parked")
	}

	m.what = "B, then A again, while the next request is handled"
	m.request(s, kindEndpoint, m.ack(mk, false), func() {
		for _, content := range []string{"e00-1", "e00-0"} {
			u := newUpdate()
			u.eds["e00"] = entryOf(kindEndpoint, "e00", []byte(content))
			m.publishUpdate(u)
		}
	})
	if mk.answered || len(s.pending) != 1 {
		t.Fatalf("want the new watch parked and the B response pending; answered %v, %d pending", mk.answered, len(s.pending))
	}
	m.what = "the B response is sent"
	m.take(s)
	if !mk.answered {
		t.Fatal("after the stream took B, its watch is still parked; want A sent again")
	}
	m.take(s)
	if got := mk.sub.ReturnedResources()["e00"]; got != m.entries[kindEndpoint]["e00"].version {
		t.Fatalf("the stream holds e00 at %s, want %s", got, m.entries[kindEndpoint]["e00"].version)
	}
	m.checkParked()
}
