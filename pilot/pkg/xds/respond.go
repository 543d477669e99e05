// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"maps"
	"sort"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// sotwResponseFor decides what a state-of-the-world watch gets, given the
// resources its subscription should have now (desired) and the Gateway's
// warm keys for the watch's type (EDS and RDS, see warmKeys). The
// subscription's ReturnedResources are name -> version (keys.version) of
// what this stream was last sent (we set them; go-control-plane keeps them
// across requests and drops names the proxy unsubscribes from).
//
//   - LDS and CDS (full state of the world): the whole desired set, when it
//     differs from what was returned, or on the first request of the type
//     on the stream (response_nonce empty), even if empty.
//   - EDS and RDS: only the desired resources whose version differs from the
//     returned one, which includes those whose cluster or Rds was replaced
//     (warming.go) (xDS protocol, "Grouping Resources into Responses": for
//     these types a SotW response may carry a subset; resources left out are
//     kept by the client). Nothing is sent when nothing differs, not even on
//     the first request: an empty response is a no-op for these types.
//
// A NACK (error_detail set) changes nothing here: what was rejected is what
// was returned, so the watch parks until a new version exists. It returns
// nil when there is nothing to send.
func sotwResponseFor(w *watch, desired []*entry, keys warmKeys) cachev3.Response {
	returned := w.sub.ReturnedResources()
	first := w.nonce() == ""
	switch w.kind {
	case kindListener, kindCluster:
		if !first && sameSet(desired, returned) {
			return nil
		}
		next := make(map[string]string, len(desired))
		for _, e := range desired {
			next[e.name] = e.version
		}
		return newSotwResponse(w.sotw, setVersion(desired, nil), desired, next)
	default:
		var changed []*entry
		for _, e := range desired {
			if v, ok := returned[e.name]; !ok || !keys.holds(v, e) {
				changed = append(changed, e)
			}
		}
		if len(changed) == 0 {
			return nil
		}
		return newSotwResponse(w.sotw, setVersion(desired, keys), changed, nextVersions(returned, changed, nil, keys))
	}
}

// deltaResponseFor decides what an incremental watch gets: every desired
// resource whose version (under keys, see sotwResponseFor) differs from
// what the stream holds (returned, seeded from initial_resource_versions on
// a reconnect), and as removed
// every name the stream holds that is no longer desired. The first request
// of a type on the stream is always answered, possibly empty, so the proxy
// finishes its initial fetch. It returns nil when there is nothing to send.
func deltaResponseFor(w *watch, desired []*entry, keys warmKeys) cachev3.DeltaResponse {
	returned := w.sub.ReturnedResources()
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
	if held < len(returned) {
		want := make(map[string]bool, len(desired))
		for _, e := range desired {
			want[e.name] = true
		}
		for n := range returned {
			if !want[n] {
				removed = append(removed, n)
			}
		}
	}
	if len(changed) == 0 && len(removed) == 0 && w.nonce() != "" {
		return nil
	}
	sort.Strings(removed)
	rs := make([]*discoveryv3.Resource, len(changed))
	for i, e := range changed {
		rs[i] = keys.resource(e)
	}
	return &deltaResponse{req: w.delta, version: setVersion(desired, keys), resources: rs, removed: removed, next: nextVersions(returned, changed, removed, keys)}
}

// nextVersions is what the stream holds after a response: returned, with
// changed set (to their versions under keys) and removed deleted. Cloning
// the map is much cheaper than building it entry by entry for a large
// subscription.
func nextVersions(returned map[string]string, changed []*entry, removed []string, keys warmKeys) map[string]string {
	next := maps.Clone(returned)
	if next == nil {
		next = make(map[string]string, len(changed))
	}
	for _, e := range changed {
		next[e.name] = keys.version(e)
	}
	for _, n := range removed {
		delete(next, n)
	}
	return next
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

// sotwResponse implements cachev3.Response over shared, pre-serialized
// entries. GetDiscoveryResponse returns a new DiscoveryResponse on every
// call because the stream server writes the nonce into it; the Anys inside
// are shared and never modified.
type sotwResponse struct {
	req       *cachev3.Request
	version   string
	resources []*anypb.Any
	next      map[string]string
}

var _ cachev3.Response = (*sotwResponse)(nil)

func newSotwResponse(req *cachev3.Request, version string, es []*entry, next map[string]string) *sotwResponse {
	rs := make([]*anypb.Any, len(es))
	for i, e := range es {
		rs[i] = e.any
	}
	return &sotwResponse{req: req, version: version, resources: rs, next: next}
}

func (r *sotwResponse) GetDiscoveryResponse() (*discoveryv3.DiscoveryResponse, error) {
	return &discoveryv3.DiscoveryResponse{VersionInfo: r.version, Resources: r.resources, TypeUrl: r.req.GetTypeUrl()}, nil
}
func (r *sotwResponse) GetRequest() *discoveryv3.DiscoveryRequest { return r.req }
func (r *sotwResponse) GetVersion() (string, error)               { return r.version, nil }
func (r *sotwResponse) GetResponseVersion() string                { return r.version }
func (r *sotwResponse) GetReturnedResources() map[string]string   { return r.next }
func (r *sotwResponse) GetContext() context.Context               { return context.Background() }

// deltaResponse implements cachev3.DeltaResponse; see sotwResponse.
type deltaResponse struct {
	req       *cachev3.DeltaRequest
	version   string
	resources []*discoveryv3.Resource
	removed   []string
	next      map[string]string
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
func (r *deltaResponse) GetNextVersionMap() map[string]string                { return r.next }
func (r *deltaResponse) GetReturnedResources() map[string]string             { return r.next }
func (r *deltaResponse) GetContext() context.Context                         { return context.Background() }
