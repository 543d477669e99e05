// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"reflect"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// What the Cache knows of a stream, for the shared kinds (EDS, SDS).
//
// go-control-plane keeps, per stream and type, the map of what was
// returned (name -> version): the next-version map of the last response it
// sent (sotw streamWrapper.send, delta processDelta's process), passed back
// to every watch as Subscription.ReturnedResources. Between a response and
// the next request nothing else writes that map (the stream's goroutine
// changes it only while handling a request, after cancelling the watch:
// sotw SetResourceSubscription deletes the names no longer subscribed,
// delta UpdateResourceSubscriptions the names unsubscribed), and a SotW
// response dropped because a request of its type came first
// (processAllExcept) never reaches it.
//
// So the Cache, told which stream a request comes from (streamCallbacks),
// keeps per stream and shared kind the map it made for that stream
// (streamHeld.own) and updates it in place when the stream takes the next
// response (nextVersions.get), instead of copying the Gateway's 20,000
// names per response. It also remembers the publish (sharedSet.seq) as of
// which the stream held everything desired (streamHeld.seq): a request
// that only acknowledges (same map, same subscription) while that set has
// not changed parks without comparing a name.

// streamHeld is what one stream holds of one shared kind.
type streamHeld struct {
	gateway string
	// own is the map the Cache made for the stream; only it is updated in
	// place.
	own map[string]string
	// m is the returned map known to hold the set as of seq, for a
	// subscription that was wildcard if wild; seq 0: not known.
	m    map[string]string
	seq  uint64
	wild bool
	// rev counts the responses the stream took; a response made at another
	// rev was computed against a map that has changed since.
	rev uint64
	// parked is the stream's parked watch of this kind, if any.
	parked *watch
}

// sameMap reports whether a and b are the same map (not equal contents).
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// noteRequest records that req, a request of a shared kind, comes from
// stream k; open looks it up. go-control-plane calls the stream callbacks
// (OnStreamRequest, OnStreamDeltaRequest) with the request it then passes
// to CreateWatch or CreateDeltaWatch. A request it then ignores (a SotW
// request with a stale nonce) is forgotten at the stream's next request
// of its kind or at its end.
func (c *Cache) noteRequest(k streamKey, req interface{ GetTypeUrl() string }) {
	kd, ok := kindOf(req.GetTypeUrl())
	if !ok || c.shared[kd] == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.lastReq[k]
	if last == nil {
		last = &[numKinds]any{}
		c.lastReq[k] = last
	}
	if old := last[kd]; old != nil {
		delete(c.reqStream, old)
	}
	last[kd] = req
	c.reqStream[req] = k
}

// heldOf is the stream state of w's stream for w's kind, or nil when the
// request's stream is not known (a caller without streamCallbacks).
// Called with c.mu held.
func (c *Cache) heldOf(w *watch, req any) *streamHeld {
	k, ok := c.reqStream[req]
	if !ok {
		return nil
	}
	delete(c.reqStream, req)
	c.lastReq[k][w.kind] = nil
	hs := c.streams[k]
	if hs == nil {
		hs = &[numKinds]*streamHeld{}
		c.streams[k] = hs
	}
	if hs[w.kind] == nil || hs[w.kind].gateway != w.gateway {
		hs[w.kind] = &streamHeld{gateway: w.gateway}
	}
	return hs[w.kind]
}

// closeStream forgets stream k.
func (c *Cache) closeStream(k streamKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last := c.lastReq[k]; last != nil {
		for _, r := range last {
			if r != nil {
				delete(c.reqStream, r)
			}
		}
	}
	delete(c.lastReq, k)
	delete(c.streams, k)
}

// inSync reports whether w's subscription holds everything desired without
// comparing names: its stream held the Gateway's set as of the set's
// current seq in this very map, and the request only acknowledges (or
// rejects) without changing the subscription. SotW requests list every
// name; go-control-plane has then deleted from the map the names no longer
// listed, so a map as long as the list holds exactly the listed names.
// Called with c.mu held.
func (c *Cache) inSync(w *watch) bool {
	st := w.held
	set := c.sets[w.kind][w.gateway]
	if st == nil || set == nil || st.seq == 0 || st.seq != set.seq || w.nonce() == "" ||
		!sameMap(st.m, w.sub.ReturnedResources()) {
		return false
	}
	wild := w.sub.IsWildcard()
	if w.sotw != nil {
		if wild {
			return st.wild
		}
		return len(w.sub.ReturnedResources()) == len(w.sub.SubscribedResources())
	}
	return len(w.delta.GetResourceNamesSubscribe()) == 0 && len(w.delta.GetResourceNamesUnsubscribe()) == 0 && wild == st.wild
}

// streamCallbacks are the ADS server's callbacks: the tracker's, and the
// Cache told which stream each request comes from and when a stream ends.
type streamCallbacks struct {
	*tracker
	cache *Cache
}

func (s streamCallbacks) OnStreamRequest(id int64, req *discoveryv3.DiscoveryRequest) error {
	s.cache.noteRequest(streamKey{id: id}, req)
	return s.tracker.OnStreamRequest(id, req)
}

func (s streamCallbacks) OnStreamClosed(id int64, n *corev3.Node) {
	s.cache.closeStream(streamKey{id: id})
	s.tracker.OnStreamClosed(id, n)
}

func (s streamCallbacks) OnStreamDeltaRequest(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
	s.cache.noteRequest(streamKey{id: id, delta: true}, req)
	return s.tracker.OnStreamDeltaRequest(id, req)
}

func (s streamCallbacks) OnDeltaStreamClosed(id int64, n *corev3.Node) {
	s.cache.closeStream(streamKey{id: id, delta: true})
	s.tracker.OnDeltaStreamClosed(id, n)
}
