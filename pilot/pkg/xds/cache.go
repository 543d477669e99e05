// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"sort"
	"sync"

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
	// edsNames and sdsNames are sorted.
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
//     only once every input collection has synced.
//
// A proxy is mapped to its Gateway by node metadata (see gatewayOf). A proxy
// whose Gateway has no published snapshot (not translated yet, translation
// failed from the start, or deleted) gets nothing and waits.
//
// Cache is safe for concurrent use. Responses are written to the stream's
// channel without blocking, under the cache lock, and never after the
// watch's cancel function has returned.
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
}

var _ cachev3.Cache = (*Cache)(nil)

// newCache returns an empty, unsynced cache.
func newCache(log *slog.Logger, m *metrics) *Cache {
	c := &Cache{
		log: log, metrics: m,
		gateways: map[string]*gatewaySnapshot{},
		watches:  map[string]map[*watch]struct{}{},
	}
	for _, k := range sharedKinds {
		c.shared[k] = map[string]*entry{}
		c.users[k] = map[string]map[string]bool{}
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
	if c.synced && c.respond(w) {
		return func() {}
	}
	ws := c.watches[w.gateway]
	if ws == nil {
		ws = map[*watch]struct{}{}
		c.watches[w.gateway] = ws
	}
	ws[w] = struct{}{}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if ws := c.watches[w.gateway]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(c.watches, w.gateway)
			}
		}
	}
}

// respond computes w's response and, if there is one, writes it to w's
// channel. It reports whether w is done. Called with c.mu held.
func (c *Cache) respond(w *watch) bool {
	snap := c.gateways[w.gateway]
	if snap == nil {
		return false
	}
	desired := c.desired(snap, w.kind, w.sub)
	if w.sotw != nil {
		r := sotwResponseFor(w, desired, snap.warm[w.kind])
		if r == nil {
			return false
		}
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
	r := deltaResponseFor(w, desired, snap.warm[w.kind])
	if r == nil {
		return false
	}
	select {
	case w.deltaCh <- r:
	default:
		c.log.Error("xds: delta response channel full, response dropped", "gateway", w.gateway, "type", w.kind.String())
		c.metrics.dropped.Inc()
	}
	return true
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
// watch whose response may have changed: all watches of a changed Gateway,
// and the EDS (SDS) watches of Gateways that use a changed EDS name
// (secret). Responses go out per Gateway in the order CDS, EDS, LDS, RDS,
// SDS.
func (c *Cache) publish(u update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	firstSync := !c.synced
	c.synced = true
	affected := map[string]bool{}
	// sharedOnly are, per Gateway not otherwise affected, the shared kinds
	// of which an entry it uses changed.
	sharedOnly := map[string]map[kind]bool{}
	// kinds are, per changed Gateway, the kinds whose response may have
	// changed (changedKinds); its parked watches of other kinds stay.
	kinds := map[string][numKinds]bool{}
	for key, snap := range u.gateways {
		if snap != nil {
			kinds[key] = changedKinds(c.gateways[key], snap)
		}
		for _, k := range sharedKinds {
			if old := c.gateways[key]; old != nil && snap != nil && sameList(old.sharedNames(k), snap.sharedNames(k)) {
				continue // the same names: the same users
			}
			if old := c.gateways[key]; old != nil {
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
		if snap == nil {
			delete(c.gateways, key)
			continue
		}
		c.gateways[key] = snap
		affected[key] = true
	}
	for _, k := range sharedKinds {
		for n, e := range u.sharedOf(k) {
			if e == nil {
				delete(c.shared[k], n)
			} else {
				c.shared[k][n] = e
			}
			for key := range c.users[k][n] {
				if sharedOnly[key] == nil {
					sharedOnly[key] = map[kind]bool{}
				}
				sharedOnly[key][k] = true
			}
		}
	}
	keys := make([]string, 0, len(c.watches))
	for key := range c.watches {
		if firstSync || affected[key] || sharedOnly[key] != nil {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		ws := c.watches[key]
		ordered := make([]*watch, 0, len(ws))
		for w := range ws {
			if firstSync || (affected[key] && kinds[key][w.kind]) || sharedOnly[key][w.kind] {
				ordered = append(ordered, w)
			}
		}
		sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].kind < ordered[j].kind })
		for _, w := range ordered {
			if c.respond(w) {
				delete(ws, w)
			}
		}
		if len(ws) == 0 {
			delete(c.watches, key)
		}
	}
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
	v := setVersion(desired, snap.warm[k])
	if v == req.GetVersionInfo() {
		return nil, errSkipFetch
	}
	return newSotwResponse(req, v, desired, nil), nil
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
