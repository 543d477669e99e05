// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// kind is one of the five xDS types we serve, numbered in the order
// responses go out when several change at once (make before break: CDS,
// then EDS, then LDS, then RDS; SDS last: Envoy asks for a listener's
// secrets only once it has the listener, and warms the listener until
// they arrive).
type kind int

const (
	kindCluster kind = iota
	kindEndpoint
	kindListener
	kindRoute
	kindSecret
	numKinds
)

var kindTypeURLs = [numKinds]string{
	resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType, resourcev3.SecretType,
}

var kindNames = [numKinds]string{"cds", "eds", "lds", "rds", "sds"}

func (k kind) String() string  { return kindNames[k] }
func (k kind) typeURL() string { return kindTypeURLs[k] }

// kindOf maps a type URL to its kind; ok is false for types we do not serve.
func kindOf(typeURL string) (kind, bool) {
	for k, u := range kindTypeURLs {
		if u == typeURL {
			return kind(k), true
		}
	}
	return 0, false
}

// entry is one resource, serialized once for every proxy and both protocol
// variants. Entries are immutable once built and shared between streams.
type entry struct {
	name string
	// version is xxhash64 of the deterministic serialization, as 16 hex
	// digits (a route configuration's from its parts' hashes,
	// routeversion.go): equal content, equal version, also across restarts
	// of pilot-discovery.
	version string
	// any is DiscoveryResponse.resources[i].
	any *anypb.Any
	// resource is DeltaDiscoveryResponse.resources[i].
	resource *discoveryv3.Resource
}

var marshalOpts = proto.MarshalOptions{Deterministic: true}

// entriesBuilt counts newEntry calls: resources serialized for proxies.
// Tests and benchmarks read it to check that a resource is serialized once
// per version, whatever number of streams receive it.
var entriesBuilt atomic.Uint64

// newEntry serializes m (of kind k) under name.
func newEntry(k kind, name string, m proto.Message) (*entry, error) {
	b, err := marshalOpts.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s %q: marshal: %w", k, name, err)
	}
	return entryOf(k, name, b), nil
}

// entryOf is the entry of a resource of kind k serialized as b (what
// marshalOpts.Marshal returns for it).
func entryOf(k kind, name string, b []byte) *entry {
	if k == kindRoute {
		return entryWithVersion(k, name, b, routeConfigurationVersion(b))
	}
	return entryWithVersion(k, name, b, hashHex(xxhash.Sum64(b)))
}

// entryWithVersion is the entry of a resource of kind k serialized as b
// whose version v the caller computed by the entry version rules.
func entryWithVersion(k kind, name string, b []byte, v string) *entry {
	entriesBuilt.Add(1)
	a := &anypb.Any{TypeUrl: k.typeURL(), Value: b}
	return &entry{name: name, version: v, any: a, resource: &discoveryv3.Resource{Name: name, Version: v, Resource: a}}
}

func hashHex(h uint64) string {
	s := strconv.FormatUint(h, 16)
	for len(s) < 16 {
		s = "0" + s
	}
	return s
}

// setVersion is the version of a set of entries: a hash of their sorted
// names and versions (under keys, see warmKeys; nil for LDS and CDS). It is
// the SotW DiscoveryResponse.version_info and the delta
// system_version_info.
func setVersion(es []*entry, keys warmKeys) string {
	if len(es) == 0 {
		return "empty"
	}
	byName := func(a, b *entry) int { return strings.Compare(a.name, b.name) }
	if !slices.IsSortedFunc(es, byName) {
		es = slices.Clone(es)
		slices.SortFunc(es, byName)
	}
	// One hash over the concatenation (the same value as writing the parts
	// to a streaming digest, at a fraction of the per-call cost).
	n := 0
	for _, e := range es {
		n += len(e.name) + len(e.version) + len(keys[e.name]) + 3
	}
	buf := make([]byte, 0, n)
	for _, e := range es {
		buf = append(buf, e.name...)
		buf = append(buf, 0)
		buf = append(buf, e.version...)
		if k, ok := keys[e.name]; ok {
			buf = append(buf, '/')
			buf = append(buf, k...)
		}
		buf = append(buf, 0)
	}
	return hashHex(xxhash.Sum64(buf))
}
