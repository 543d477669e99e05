// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"maps"
	"slices"
	"sort"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// plan is what one watch gets: the entries to send (sorted by name) and,
// on delta, the names to remove (sorted). all: a SotW LDS or CDS response,
// whose entries are the whole set.
type plan struct {
	changed []*entry
	removed []string
	all     bool
}

// fullPlan decides what a watch gets from the resources its subscription
// should have now (desired) and the Gateway's warm keys for the watch's
// type (EDS and RDS, see warmKeys). returned is name -> version
// (keys.version) of what the stream was last sent (we set it; go-control-
// plane keeps it across requests and drops names the proxy unsubscribes
// from).
//
//   - SotW LDS and CDS (full state of the world): the whole desired set,
//     when it differs from what was returned, or on the first request of
//     the type on the stream (response_nonce empty), even if empty.
//   - SotW EDS, RDS and SDS: only the desired resources whose version
//     differs from the returned one, which includes those whose cluster or
//     Rds was replaced (warming.go) (xDS protocol, "Grouping Resources into
//     Responses": for these types a SotW response may carry a subset;
//     resources left out are kept by the client). Nothing is sent when
//     nothing differs, not even on the first request: an empty response is
//     a no-op for these types.
//   - Delta: the desired resources whose version differs from what the
//     stream holds (seeded from initial_resource_versions on a reconnect)
//     and, as removed, every name it holds that is no longer desired. The
//     first request of a type on the stream is always answered, possibly
//     empty, so the proxy finishes its initial fetch.
//
// A NACK (error_detail set) changes nothing here: what was rejected is what
// was returned, so the watch parks until a new version exists. It returns
// false when there is nothing to send.
func fullPlan(w *watch, desired []*entry, keys warmKeys, returned map[string]string) (plan, bool) {
	first := w.nonce() == ""
	if w.sotw != nil && (w.kind == kindListener || w.kind == kindCluster) {
		if !first && sameSet(desired, returned) {
			return plan{}, false
		}
		return plan{changed: desired, all: true}, true
	}
	var changed []*entry
	held := 0 // desired names the stream holds
	for _, e := range desired {
		v, ok := returned[e.name]
		if ok {
			held++
		}
		if !ok || !keys.holds(v, e) {
			changed = append(changed, e)
		}
	}
	var removed []string
	if w.delta != nil && held < len(returned) {
		want := make(map[string]bool, len(desired))
		for _, e := range desired {
			want[e.name] = true
		}
		for n := range returned {
			if !want[n] {
				removed = append(removed, n)
			}
		}
		sort.Strings(removed)
	}
	if len(changed) == 0 && len(removed) == 0 && (w.sotw != nil || !first) {
		return plan{}, false
	}
	return plan{changed: changed, removed: removed}, true
}

// changedPlan is fullPlan for a watch of a shared kind (EDS, SDS) whose
// stream held everything desired before this publish (watch.synced),
// computed over names alone: the sorted names whose membership, entry or
// warm key the publish may have changed (setChange). Every other desired
// name is held at its version, and a delta stream held no name outside
// what was desired, so the rest of fullPlan's comparison finds nothing.
// Called with c.mu held.
func (c *Cache) changedPlan(w *watch, snap *gatewaySnapshot, names []string) (plan, bool) {
	returned := w.returned()
	wild := w.sub.IsWildcard()
	subscribed := w.sub.SubscribedResources()
	listed := snap.sharedNames(w.kind)
	keys := snap.warm[w.kind]
	var p plan
	for _, n := range names {
		e := c.shared[w.kind][n]
		_, sub := subscribed[n]
		_, member := slices.BinarySearch(listed, n)
		v, held := returned[n]
		switch {
		case e != nil && member && (wild || sub):
			if !held || !keys.holds(v, e) {
				p.changed = append(p.changed, e)
			}
		case held && w.delta != nil:
			p.removed = append(p.removed, n)
		}
	}
	return p, len(p.changed) > 0 || len(p.removed) > 0
}

func sameSet(desired []*entry, returned map[string]string) bool {
	if len(desired) != len(returned) {
		return false
	}
	for _, e := range desired {
		if v, ok := returned[e.name]; !ok || v != e.version {
			return false
		}
	}
	return true
}

// nextVersions is what a stream holds after a response (go-control-plane
// reads it with GetReturnedResources or GetNextVersionMap when it sends the
// response, and passes it back as the next watch's returned resources):
// what it held, with the response's entries set to their versions (under
// the warm keys) and its removed names deleted. It is made when the
// response is sent, not when it is computed: a SotW response that
// go-control-plane drops is never applied (streams.go).
type nextVersions struct {
	c *Cache
	// held is the stream's state (nil when the Cache does not know the
	// stream): its map is updated in place. Otherwise base, the map the
	// response was computed against, is copied.
	held *streamHeld
	base map[string]string
	// rev, seq and wild are held's rev, the set's seq and the watch's
	// wildcard when the response was computed.
	rev, seq uint64
	wild     bool
	// changed are recorded at their versions under keys (all: at their
	// own versions, in a new map); removed are deleted.
	all     bool
	changed []*entry
	keys    warmKeys
	removed []string

	mu   sync.Mutex
	done bool
	m    map[string]string
}

// setNext fills n, a response's next-version map, for w's response p.
func (c *Cache) setNext(n *nextVersions, w *watch, p *plan) {
	n.c, n.held, n.base, n.wild = c, w.held, w.returned(), w.sub.IsWildcard()
	n.all, n.changed, n.removed = p.all, p.changed, p.removed
	if !p.all {
		n.keys = c.gateways[w.gateway].warm[w.kind]
	}
	if w.held != nil {
		n.rev, n.seq = w.held.rev, c.sets[w.kind][w.gateway].seq
	}
}

// get is the map, made on the first call (nil for a response without one,
// a Fetch's).
func (n *nextVersions) get() map[string]string {
	if n.c == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.done {
		n.m, n.done = n.make(), true
	}
	return n.m
}

func (n *nextVersions) make() map[string]string {
	if n.all {
		m := make(map[string]string, len(n.changed))
		n.apply(m)
		return m
	}
	if n.held == nil {
		m := maps.Clone(n.base)
		if m == nil {
			m = make(map[string]string, len(n.changed))
		}
		n.apply(m)
		return m
	}
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return n.c.took(n)
}

func (n *nextVersions) apply(m map[string]string) {
	for _, e := range n.changed {
		m[e.name] = n.keys.version(e)
	}
	for _, name := range n.removed {
		delete(m, name)
	}
}

// took records that n's stream took its response: the stream's map is
// updated in place (copied from the response's base the first time). The
// stream now holds the set as of n's seq, unless its map changed after the
// response was computed (another response taken, or a watch opened before
// this response was taken): then the stream's parked watch, if any, is
// answered again from its whole set. Called with c.mu held.
func (c *Cache) took(n *nextVersions) map[string]string {
	st := n.held
	if st.own == nil {
		st.own = maps.Clone(n.base)
		if st.own == nil {
			st.own = make(map[string]string, len(n.changed))
		}
	}
	n.apply(st.own)
	stale := st.rev != n.rev || st.parked != nil
	st.rev++
	st.m = st.own
	st.seq, st.wild = n.seq, n.wild
	if !stale {
		return st.own
	}
	st.seq = 0
	if w := st.parked; w != nil {
		w.synced = false
		if c.respond(w, nil) {
			c.unpark(w)
		}
	}
	return st.own
}

// sotwResponse implements cachev3.Response over shared, pre-serialized
// entries. GetDiscoveryResponse returns a new DiscoveryResponse on every
// call because the stream server writes the nonce into it; the Anys inside
// are shared and never modified.
type sotwResponse struct {
	req       *cachev3.Request
	version   string
	resources []*anypb.Any
	next      nextVersions
}

var _ cachev3.Response = (*sotwResponse)(nil)

func newSotwResponse(req *cachev3.Request, version string, es []*entry) *sotwResponse {
	rs := make([]*anypb.Any, len(es))
	for i, e := range es {
		rs[i] = e.any
	}
	return &sotwResponse{req: req, version: version, resources: rs}
}

func (r *sotwResponse) GetDiscoveryResponse() (*discoveryv3.DiscoveryResponse, error) {
	return &discoveryv3.DiscoveryResponse{VersionInfo: r.version, Resources: r.resources, TypeUrl: r.req.GetTypeUrl()}, nil
}
func (r *sotwResponse) GetRequest() *discoveryv3.DiscoveryRequest { return r.req }
func (r *sotwResponse) GetVersion() (string, error)               { return r.version, nil }
func (r *sotwResponse) GetResponseVersion() string                { return r.version }
func (r *sotwResponse) GetContext() context.Context               { return context.Background() }
func (r *sotwResponse) GetReturnedResources() map[string]string   { return r.next.get() }

// deltaResponse implements cachev3.DeltaResponse; see sotwResponse.
type deltaResponse struct {
	req       *cachev3.DeltaRequest
	version   string
	resources []*discoveryv3.Resource
	removed   []string
	next      nextVersions
}

var _ cachev3.DeltaResponse = (*deltaResponse)(nil)

func (r *deltaResponse) GetDeltaDiscoveryResponse() (*discoveryv3.DeltaDiscoveryResponse, error) {
	return &discoveryv3.DeltaDiscoveryResponse{
		SystemVersionInfo: r.version, Resources: r.resources, RemovedResources: r.removed, TypeUrl: r.req.GetTypeUrl(),
	}, nil
}
func (r *deltaResponse) GetDeltaRequest() *discoveryv3.DeltaDiscoveryRequest { return r.req }
func (r *deltaResponse) GetSystemVersion() (string, error)                   { return r.version, nil }
func (r *deltaResponse) GetResponseVersion() string                          { return r.version }
func (r *deltaResponse) GetNextVersionMap() map[string]string                { return r.next.get() }
func (r *deltaResponse) GetReturnedResources() map[string]string             { return r.next.get() }
func (r *deltaResponse) GetContext() context.Context                         { return context.Background() }
