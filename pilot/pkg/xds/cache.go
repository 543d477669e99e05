// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sort"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// gatewaySnapshot is the last good LDS, RDS and CDS of one Gateway, the
// EDS names its clusters use and the SDS names its listeners use.
// Immutable once published.
type gatewaySnapshot struct {
	key string
	// byKind holds clusters, listeners and routes (kindEndpoint and
	// kindSecret are nil: assignments and secrets live in Cache.shared,
	// shared between Gateways), sorted by name.
	byKind [numKinds][]*entry
	// edsNames and sdsNames are sorted, without duplicates.
	edsNames []string
	sdsNames []string
	// warm are the warm keys of EDS and RDS names (warming.go); nil for
	// the other kinds.
	warm [numKinds]warmKeys
}

// Cache is the ADS server's configuration cache: the go-control-plane
// cache.Cache the stream servers call. Unlike cachev3.SnapshotCache it
//
//   - holds each resource serialized once (entry), shared by every watch;
//   - answers a request only when the proxy's subscription lacks something
//     we have: a NACK (error_detail set) of what we sent is therefore parked
//     until a newer version exists, never answered with the same version;
//   - sends, on SotW EDS and RDS and on every delta stream, only the
//     resources whose version differs from what the stream was last sent;
//     SotW LDS and CDS carry the full set, as the xDS protocol requires;
//   - answers nothing before the first publish, which the push path makes
//     only once every input collection has synced;
//   - answers a publish at the cost of what it changed for EDS and SDS
//     (sharedset.go): a watch that held everything desired is answered
//     from the changed names alone, its version is the Gateway's set
//     version kept per change, a stream's returned map is updated in place,
//     and a request that only acknowledges parks without comparing a name
//     (streams.go). This needs the stream servers built with
//     streamCallbacks; a caller of CreateWatch without them gets every
//     request compared in full and a copied map per response, as before.
//
// A proxy is mapped to its Gateway by node metadata (see gatewayOf). A proxy
// whose Gateway has no published snapshot (not translated yet, translation
// failed from the start, or deleted) gets nothing and waits.
//
// Cache is safe for concurrent use. Responses are written to the stream's
// channel without blocking, under the cache lock, and never after the
// watch's cancel function has returned. A response's returned map is made
// when the stream server reads it, under the cache lock.
type Cache struct {
	log     *slog.Logger
	metrics *metrics

	mu       sync.Mutex
	synced   bool
	gateways map[string]*gatewaySnapshot
	// shared are, for kindEndpoint, every ClusterLoadAssignment by cluster
	// name and, for kindSecret, every SDS secret by name: resources that
	// Gateways share by name.
	shared [numKinds]map[string]*entry
	// users are, per shared kind and name, the Gateways whose snapshot
	// names it (sharedNames).
	users [numKinds]map[string]map[string]bool
	// watches are the open (parked) watches, by Gateway key.
	watches map[string]map[*watch]struct{}

	// seq counts publishes.
	seq uint64
	// sets are, per shared kind, each published Gateway's set
	// (sharedset.go).
	sets [numKinds]map[string]*sharedSet
	// streams are, per stream and shared kind, what the stream holds;
	// reqStream maps a request noted by the stream callbacks to its stream
	// until its watch opens, lastReq each stream's last noted request per
	// kind (streams.go).
	streams   map[streamKey]*[numKinds]*streamHeld
	reqStream map[any]streamKey
	lastReq   map[streamKey]*[numKinds]any
}

var _ cachev3.Cache = (*Cache)(nil)

// newCache returns an empty, unsynced cache.
func newCache(log *slog.Logger, m *metrics) *Cache {
	c := &Cache{
		log: log, metrics: m,
		gateways:  map[string]*gatewaySnapshot{},
		watches:   map[string]map[*watch]struct{}{},
		streams:   map[streamKey]*[numKinds]*streamHeld{},
		reqStream: map[any]streamKey{},
		lastReq:   map[streamKey]*[numKinds]any{},
	}
	for _, k := range sharedKinds {
		c.shared[k] = map[string]*entry{}
		c.users[k] = map[string]map[string]bool{}
		c.sets[k] = map[string]*sharedSet{}
	}
	return c
}

// sharedKinds are the kinds whose resources Gateways share by name.
var sharedKinds = []kind{kindEndpoint, kindSecret}

// sharedNames are the names of kind k (kindEndpoint, kindSecret) that the
// snapshot's Gateway uses; nil for the other kinds.
func (s *gatewaySnapshot) sharedNames(k kind) []string {
	switch k {
	case kindEndpoint:
		return s.edsNames
	case kindSecret:
		return s.sdsNames
	}
	return nil
}

// watch is one parked request of one stream for one type.
type watch struct {
	gateway string
	kind    kind
	sotw    *cachev3.Request
	delta   *cachev3.DeltaRequest
	sub     cachev3.Subscription
	sotwCh  chan cachev3.Response
	deltaCh chan cachev3.DeltaResponse

	// held is the stream's state for a shared kind, when the Cache knows
	// the stream (streams.go).
	held *streamHeld
	// synced: the subscription held everything desired as of the set's
	// seq (shared kinds only).
	synced bool
	seq    uint64
}

// request is the watch's request, as the stream callbacks saw it.
func (w *watch) request() any {
	if w.sotw != nil {
		return w.sotw
	}
	return w.delta
}

// returned is what the stream holds of the watch's kind: the map the Cache
// keeps for the stream once it took a response (the very map
// go-control-plane then passes back), else the subscription's.
func (w *watch) returned() map[string]string {
	if w.held != nil && w.held.own != nil {
		return w.held.own
	}
	return w.sub.ReturnedResources()
}

// nonce is the response_nonce of the watch's request: "" on the first
// request of a type on a stream.
func (w *watch) nonce() string {
	if w.sotw != nil {
		return w.sotw.GetResponseNonce()
	}
	return w.delta.GetResponseNonce()
}

// CreateWatch implements cachev3.ConfigWatcher for the state-of-the-world
// variants. It answers at once when the subscription lacks something the
// proxy's Gateway has, else parks the request until a publish changes what
// it would get. A node without the Gateway metadata is an InvalidArgument
// error (the stream ends); a type we do not serve parks forever.
func (c *Cache) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, ch chan cachev3.Response) (func(), error) {
	gw, err := gatewayOf(req.GetNode())
	if err != nil {
		return nil, err
	}
	k, ok := kindOf(req.GetTypeUrl())
	if !ok {
		return func() {}, nil
	}
	return c.open(&watch{gateway: gw, kind: k, sotw: req, sub: sub, sotwCh: ch}), nil
}

// CreateDeltaWatch implements cachev3.ConfigWatcher for the incremental
// variants; see CreateWatch.
func (c *Cache) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, ch chan cachev3.DeltaResponse) (func(), error) {
	gw, err := gatewayOf(req.GetNode())
	if err != nil {
		return nil, err
	}
	k, ok := kindOf(req.GetTypeUrl())
	if !ok {
		return func() {}, nil
	}
	return c.open(&watch{gateway: gw, kind: k, delta: req, sub: sub, deltaCh: ch}), nil
}

// open answers w now if it can, else parks it. The returned cancel removes
// a parked watch; after it returns the cache never writes to w's channel.
func (c *Cache) open(w *watch) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shared[w.kind] != nil {
		w.held = c.heldOf(w, w.request())
	}
	if c.synced {
		if c.inSync(w) {
			c.markInSync(w)
		} else {
			if w.held != nil {
				// The request may have changed the map (go-control-plane
				// deletes what is no longer subscribed): what the stream
				// holds is known again once this watch parks or its
				// response is taken.
				w.held.seq = 0
			}
			if c.respond(w, nil) {
				return func() {}
			}
		}
	}
	ws := c.watches[w.gateway]
	if ws == nil {
		ws = map[*watch]struct{}{}
		c.watches[w.gateway] = ws
	}
	ws[w] = struct{}{}
	if w.held != nil {
		w.held.parked = w
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.unpark(w)
	}
}

// unpark removes w from the parked watches. Called with c.mu held.
func (c *Cache) unpark(w *watch) {
	if ws := c.watches[w.gateway]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(c.watches, w.gateway)
		}
	}
	if w.held != nil && w.held.parked == w {
		w.held.parked = nil
	}
}

// respond computes w's response and, if there is one, writes it to w's
// channel. It reports whether w is done. ch, when not nil, is what the
// publish being answered changed for w's Gateway and kind: a watch that
// was in sync before it is answered from ch's names (changedPlan), any
// other from its whole set (fullPlan). Called with c.mu held.
func (c *Cache) respond(w *watch, ch *setChange) bool {
	snap := c.gateways[w.gateway]
	if snap == nil {
		w.synced = false
		return false
	}
	var p plan
	var send bool
	var desired []*entry
	if ch != nil && !ch.full && w.synced && w.seq == ch.prevSeq {
		p, send = c.changedPlan(w, snap, ch.names)
	} else {
		desired = c.desired(snap, w.kind, w.sub)
		p, send = fullPlan(w, desired, snap.warm[w.kind], w.returned())
	}
	if !send {
		c.markInSync(w)
		return false
	}
	w.synced = false
	version := c.versionOf(snap, w.kind, desired)
	if w.sotw != nil {
		r := newSotwResponse(w.sotw, version, p.changed)
		c.setNext(&r.next, w, &p)
		select {
		case w.sotwCh <- r:
		default:
			// The stream servers buffer one response per type and the
			// cache answers each watch once, so this cannot happen; if it
			// did the proxy would miss this version until the next one.
			c.log.Error("xds: response channel full, response dropped", "gateway", w.gateway, "type", w.kind.String())
			c.metrics.dropped.Inc()
		}
		return true
	}
	keys := snap.warm[w.kind]
	rs := make([]*discoveryv3.Resource, len(p.changed))
	for i, e := range p.changed {
		rs[i] = keys.resource(e)
	}
	r := &deltaResponse{req: w.delta, version: version, resources: rs, removed: p.removed}
	c.setNext(&r.next, w, &p)
	select {
	case w.deltaCh <- r:
	default:
		c.log.Error("xds: delta response channel full, response dropped", "gateway", w.gateway, "type", w.kind.String())
		c.metrics.dropped.Inc()
	}
	return true
}

// markInSync records that w's subscription holds everything desired now.
// Called with c.mu held.
func (c *Cache) markInSync(w *watch) {
	set := c.sets[w.kind][w.gateway]
	if set == nil {
		return
	}
	w.synced, w.seq = true, set.seq
	if st := w.held; st != nil {
		st.m, st.seq, st.wild = w.returned(), set.seq, w.sub.IsWildcard()
	}
}

// versionOf is the version of a response of kind k to snap's Gateway:
// for EDS and SDS the Gateway's set version, else a hash of desired.
// Called with c.mu held.
func (c *Cache) versionOf(snap *gatewaySnapshot, k kind, desired []*entry) string {
	switch k {
	case kindEndpoint, kindSecret:
		return c.sets[k][snap.key].version()
	case kindListener, kindCluster:
		return setVersion(desired, nil)
	}
	return setVersion(desired, snap.warm[k])
}

// desired is what a subscription of kind k to snap's Gateway gets now,
// sorted by name: with a wildcard subscription every resource of the kind
// the Gateway has (for EDS: every EDS name of its clusters; for SDS: every
// secret its listeners name), else those of the subscribed names that
// exist. An EDS name the Gateway's clusters do not use, or a secret its
// listeners do not name, does not exist for its proxies: a proxy of one
// Gateway never receives another Gateway's certificate, whatever it asks
// for. Called with c.mu held.
func (c *Cache) desired(snap *gatewaySnapshot, k kind, sub cachev3.Subscription) []*entry {
	wild := sub.IsWildcard()
	names := sub.SubscribedResources()
	var out []*entry
	if c.shared[k] != nil {
		for _, n := range snap.sharedNames(k) {
			if _, ok := names[n]; !wild && !ok {
				continue
			}
			if e := c.shared[k][n]; e != nil {
				out = append(out, e)
			}
		}
		return out
	}
	for _, e := range snap.byKind[k] {
		if _, ok := names[e.name]; wild || ok {
			out = append(out, e)
		}
	}
	return out
}

// update is one publish: the Gateways whose snapshot changed (nil value:
// removed) and the EDS and SDS entries that changed (nil value: removed).
type update struct {
	gateways map[string]*gatewaySnapshot
	eds      map[string]*entry
	sds      map[string]*entry
}

func newUpdate() update {
	return update{gateways: map[string]*gatewaySnapshot{}, eds: map[string]*entry{}, sds: map[string]*entry{}}
}

// sharedOf is u's changed entries of shared kind k.
func (u update) sharedOf(k kind) map[string]*entry {
	if k == kindSecret {
		return u.sds
	}
	return u.eds
}

// publish applies u, marks the cache synced, and answers every parked
// watch whose response may have changed: the watches of a changed Gateway
// of the kinds whose entries, names or warm keys changed, and the EDS (SDS)
// watches of Gateways that use a changed EDS name (secret). Responses go
// out per Gateway in the order CDS, EDS, LDS, RDS, SDS.
func (c *Cache) publish(u update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	firstSync := !c.synced
	c.synced = true
	c.seq++
	// olds are the previous snapshots of the Gateways u changes (nil: new).
	olds := make(map[string]*gatewaySnapshot, len(u.gateways))
	// kinds are, per changed Gateway, the kinds whose response may have
	// changed (changedKinds); its parked watches of other kinds stay.
	kinds := map[string][numKinds]bool{}
	for key, snap := range u.gateways {
		old := c.gateways[key]
		olds[key] = old
		if snap != nil {
			kinds[key] = changedKinds(old, snap)
		}
		c.relink(key, old, snap)
		if snap == nil {
			delete(c.gateways, key)
			continue
		}
		c.gateways[key] = snap
	}
	var oldEntries [numKinds]map[string]*entry
	for _, k := range sharedKinds {
		changed := u.sharedOf(k)
		if len(changed) > 0 {
			oldEntries[k] = make(map[string]*entry, len(changed))
		}
		for n, e := range changed {
			oldEntries[k][n] = c.shared[k][n]
			if e == nil {
				delete(c.shared[k], n)
			} else {
				c.shared[k][n] = e
			}
		}
	}
	changes := c.sharedChanges(u, olds, oldEntries)
	keys := make([]string, 0, len(c.watches))
	for key := range c.watches {
		if firstSync || (kinds[key] != [numKinds]bool{}) || changes[key] != nil {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		ws := c.watches[key]
		ordered := make([]*watch, 0, len(ws))
		for w := range ws {
			if firstSync || (c.shared[w.kind] == nil && kinds[key][w.kind]) || (changes[key] != nil && changes[key][w.kind] != nil) {
				ordered = append(ordered, w)
			}
		}
		sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].kind < ordered[j].kind })
		for _, w := range ordered {
			var ch *setChange
			if !firstSync && changes[key] != nil {
				ch = changes[key][w.kind]
			}
			if c.respond(w, ch) {
				c.unpark(w)
			}
		}
	}
}

// relink moves the users of the shared names of Gateway key from old's
// names to snap's (either may be nil). Called with c.mu held.
func (c *Cache) relink(key string, old, snap *gatewaySnapshot) {
	for _, k := range sharedKinds {
		if old != nil && snap != nil && sameList(old.sharedNames(k), snap.sharedNames(k)) {
			continue // the same names: the same users
		}
		if old != nil {
			for _, n := range old.sharedNames(k) {
				if us := c.users[k][n]; us != nil {
					delete(us, key)
					if len(us) == 0 {
						delete(c.users[k], n)
					}
				}
			}
		}
		if snap == nil {
			continue
		}
		for _, n := range snap.sharedNames(k) {
			us := c.users[k][n]
			if us == nil {
				us = map[string]bool{}
				c.users[k][n] = us
			}
			us[key] = true
		}
	}
}

// sharedChanges updates the Gateways' sets (sharedset.go) for a publish
// that replaced the snapshots olds (nil: the Gateway is new) and the shared
// entries oldEntries (nil: the entry is new), and returns per Gateway and
// shared kind what changed. Its cost is the changed entries times their
// users, plus, for a Gateway whose names or warm keys changed, its names.
// Called with c.mu held, after u is applied.
func (c *Cache) sharedChanges(u update, olds map[string]*gatewaySnapshot, oldEntries [numKinds]map[string]*entry) map[string]*[numKinds]*setChange {
	var out map[string]*[numKinds]*setChange
	changeOf := func(key string) *[numKinds]*setChange {
		if out == nil {
			out = map[string]*[numKinds]*setChange{}
		}
		if out[key] == nil {
			out[key] = &[numKinds]*setChange{}
		}
		return out[key]
	}
	for _, k := range sharedKinds {
		var names map[string]map[string]struct{}
		namesOf := func(key string) map[string]struct{} {
			if names == nil {
				names = map[string]map[string]struct{}{}
			}
			if names[key] == nil {
				names[key] = map[string]struct{}{}
			}
			return names[key]
		}
		for key, old := range olds {
			snap := c.gateways[key]
			switch {
			case snap == nil:
				delete(c.sets[k], key)
			case old == nil:
				set := fullSet(c.viewOf(snap, k, nil))
				set.seq = c.seq
				c.sets[k][key] = &set
				changeOf(key)[k] = &setChange{full: true}
			case !stringsEqual(old.sharedNames(k), snap.sharedNames(k)) || !sameWarm(old.warm[k], snap.warm[k]):
				changedNames(namesOf(key), old.sharedNames(k), snap.sharedNames(k))
				changedKeys(namesOf(key), old.warm[k], snap.warm[k])
			}
		}
		for n := range u.sharedOf(k) {
			for key := range c.users[k][n] {
				if out[key] != nil && out[key][k] != nil {
					continue // new: answered from its whole set
				}
				namesOf(key)[n] = struct{}{}
			}
		}
		for key, ns := range names {
			if len(ns) == 0 {
				continue
			}
			sorted := slices.Sorted(maps.Keys(ns))
			set := c.sets[k][key]
			oldSnap := c.gateways[key]
			if o, ok := olds[key]; ok {
				oldSnap = o
			}
			set.apply(c.viewOf(oldSnap, k, oldEntries[k]), c.viewOf(c.gateways[key], k, nil), sorted)
			changeOf(key)[k] = &setChange{names: sorted, prevSeq: set.seq}
			set.seq = c.seq
		}
	}
	return out
}

// viewOf is snap's set of kind k: over the current entries, or, with
// replaced, over the entries before the publish (replaced holds those the
// publish changed, nil for a new one). Called with c.mu held.
func (c *Cache) viewOf(snap *gatewaySnapshot, k kind, replaced map[string]*entry) setView {
	entries := func(n string) *entry { return c.shared[k][n] }
	if replaced != nil {
		entries = func(n string) *entry {
			if e, ok := replaced[n]; ok {
				return e
			}
			return c.shared[k][n]
		}
	}
	return setView{names: snap.sharedNames(k), warm: snap.warm[k], entries: entries}
}

// changedKinds are the kinds of which a watch of snap's Gateway may get
// another response than with old: all when old is nil; else those whose
// entries, shared names or warm keys differ.
func changedKinds(old, snap *gatewaySnapshot) [numKinds]bool {
	var out [numKinds]bool
	for k := range numKinds {
		out[k] = old == nil || !sameEntries(old.byKind[k], snap.byKind[k]) ||
			!stringsEqual(old.sharedNames(k), snap.sharedNames(k)) || !sameWarm(old.warm[k], snap.warm[k])
	}
	return out
}

func sameEntries(a, b []*entry) bool {
	if sameList(a, b) {
		return true
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && (a[i].name != b[i].name || a[i].version != b[i].version) {
			return false
		}
	}
	return true
}

// sameWarm reports whether a and b hold the same keys: the same map (the
// push path keeps it while the lists it comes from are the same), or
// equal ones.
func sameWarm(a, b warmKeys) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		return true
	}
	return maps.Equal(a, b)
}

// Synced reports whether the first publish happened.
func (c *Cache) Synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// snapshot returns the Gateway's published LDS, RDS and CDS entries, its
// EDS entries and its SDS entries, or false.
func (c *Cache) snapshot(gateway string) (snap *gatewaySnapshot, eds, sds []*entry, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap = c.gateways[gateway]
	if snap == nil {
		return nil, nil, nil, false
	}
	for _, n := range snap.edsNames {
		if e := c.shared[kindEndpoint][n]; e != nil {
			eds = append(eds, e)
		}
	}
	for _, n := range snap.sdsNames {
		if e := c.shared[kindSecret][n]; e != nil {
			sds = append(sds, e)
		}
	}
	return snap, eds, sds, true
}

// errSkipFetch is returned by Fetch when the client already has the version.
var errSkipFetch = cachetypes.SkipFetchError{}

// Fetch implements cachev3.ConfigFetcher (REST polling): the full response
// for the request's names, or cachetypes.SkipFetchError when its
// version_info is current. Before the first publish, or for a Gateway
// without a snapshot, it returns an error: a poller never gets an empty
// configuration.
func (c *Cache) Fetch(_ context.Context, req *cachev3.Request) (cachev3.Response, error) {
	gw, err := gatewayOf(req.GetNode())
	if err != nil {
		return nil, err
	}
	k, ok := kindOf(req.GetTypeUrl())
	if !ok {
		return nil, errors.New("xds: unsupported type " + req.GetTypeUrl())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	snap := c.gateways[gw]
	if !c.synced || snap == nil {
		return nil, errors.New("xds: no configuration yet for gateway " + gw)
	}
	desired := c.desired(snap, k, fetchSubscription(req.GetResourceNames()))
	v := c.versionOf(snap, k, desired)
	if v == req.GetVersionInfo() {
		return nil, errSkipFetch
	}
	return newSotwResponse(req, v, desired), nil
}

// fetchSubscription is the subscription of a one-off REST request.
type fetchSubscription []string

func (f fetchSubscription) ReturnedResources() map[string]string { return nil }
func (f fetchSubscription) IsWildcard() bool                     { return len(f) == 0 }
func (f fetchSubscription) SubscribedResources() map[string]struct{} {
	m := make(map[string]struct{}, len(f))
	for _, n := range f {
		m[n] = struct{}{}
	}
	return m
}
