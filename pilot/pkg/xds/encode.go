// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// gatewayEncoding is what the push path keeps of the set it last served
// for one Gateway, so that a new set costs what changed: the validation
// baseline (core.SetValidator), each message's entry, each route
// configuration's per-virtual-host bytes, and what is derived from the
// lists (EDS and SDS names, warm keys). The translator keeps the message
// of everything a change leaves equal (core.Translator), so "unchanged"
// is "the same message" here.
type gatewayEncoding struct {
	validator core.SetValidator

	listeners  []*listenerv3.Listener
	lisEntries []*entry
	clusters   []*clusterv3.Cluster
	clEntries  []*entry
	routes     map[string]*rcEncoding

	edsNames []string
	sdsNames []string
	warmEDS  warmKeys
	warmRDS  warmKeys
}

// rcEncoding is one route configuration's entry and, for each of its
// virtual hosts, its serialization (a part of the entry's bytes) and the
// hash of it, from which the entry's version is made (routeversion.go).
type rcEncoding struct {
	rc      *routev3.RouteConfiguration
	entry   *entry
	vhosts  []*routev3.VirtualHost
	vhBytes [][]byte
	// hashes holds xxhash64 of each virtual host's bytes, 8 bytes little
	// endian each, in order: the middle part of the version's input.
	hashes []byte
}

// entriesFor are the entries of msgs (kind k), reusing last's entry for
// each message that was in last (lastMsgs, aligned with last).
func entriesFor[T interface {
	proto.Message
	GetName() string
}](k kind, msgs, lastMsgs []T, last []*entry) ([]*entry, error) {
	if sameList(msgs, lastMsgs) && len(last) == len(msgs) && last != nil {
		return last, nil
	}
	out := make([]*entry, len(msgs))
	i := 0
	for j, m := range msgs {
		if k := findMsg(lastMsgs, i, m); k >= 0 {
			out[j] = last[k]
			i = k + 1
			continue
		}
		e, err := newEntry(k, m.GetName(), m)
		if err != nil {
			return nil, err
		}
		out[j] = e
	}
	return out, nil
}

// findMsg is the index of m in last at i or a few places after, -1 when
// not there (a message added or removed shifts the rest by a few).
func findMsg[T proto.Message](last []T, i int, m T) int {
	for k := i; k < len(last) && k < i+4; k++ {
		if any(last[k]) == any(m) {
			return k
		}
	}
	return -1
}

// routeEntries are the entries of rcs, each encoded from its virtual
// hosts' bytes (encodeRouteConfiguration); encs becomes their encodings.
func routeEntries(rcs []*routev3.RouteConfiguration, encs map[string]*rcEncoding) ([]*entry, map[string]*rcEncoding, error) {
	out := make([]*entry, len(rcs))
	next := make(map[string]*rcEncoding, len(rcs))
	for i, rc := range rcs {
		last := encs[rc.GetName()]
		if last != nil && last.rc == rc {
			out[i], next[rc.GetName()] = last.entry, last
			continue
		}
		enc, err := encodeRouteConfiguration(rc, last)
		if err != nil {
			return nil, nil, err
		}
		out[i], next[rc.GetName()] = enc.entry, enc
	}
	return out, next, nil
}

// encodeRouteConfiguration serializes rc as marshalOpts would, byte for
// byte, from the bytes of its virtual hosts that last already holds. A
// message's encoding is its fields in field number order (protobuf-go's
// deterministic encoder writes known fields by number), and a repeated
// message field is the concatenation of its elements, each as tag, length
// and bytes; virtual_hosts is field 2, after name (1) and before every
// other field. So the bytes are: name, then each virtual host, then the
// other fields. The version is made from the parts (routeversion.go): the
// virtual hosts' hashes are kept with their bytes, so a new version hashes
// its new virtual hosts and the list of hashes, not the whole.
func encodeRouteConfiguration(rc *routev3.RouteConfiguration, last *rcEncoding) (*rcEncoding, error) {
	head, err := marshalOpts.Marshal(&routev3.RouteConfiguration{Name: rc.GetName()})
	if err != nil {
		return nil, err
	}
	tail, err := marshalOpts.Marshal(rcFieldsAfterVirtualHosts(rc))
	if err != nil {
		return nil, err
	}
	vhs := rc.GetVirtualHosts()
	parts := make([][]byte, len(vhs))
	hashes := make([]byte, 8*len(vhs))
	size := len(head) + len(tail)
	i := 0
	for j, vh := range vhs {
		if last != nil {
			if k := findMsg(last.vhosts, i, vh); k >= 0 {
				parts[j] = last.vhBytes[k]
				copy(hashes[8*j:8*j+8], last.hashes[8*k:8*k+8])
				i = k + 1
			}
		}
		if parts[j] == nil {
			b, err := marshalOpts.Marshal(vh)
			if err != nil {
				return nil, err
			}
			parts[j] = b
			binary.LittleEndian.PutUint64(hashes[8*j:], xxhash.Sum64(b))
		}
		size += protowire.SizeTag(virtualHostsField) + protowire.SizeBytes(len(parts[j]))
	}
	buf := make([]byte, 0, size)
	buf = append(buf, head...)
	enc := &rcEncoding{rc: rc, vhosts: vhs, vhBytes: make([][]byte, len(vhs)), hashes: hashes}
	for j, p := range parts {
		buf = protowire.AppendTag(buf, virtualHostsField, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(len(p)))
		start := len(buf)
		buf = append(buf, p...)
		enc.vhBytes[j] = buf[start:len(buf):len(buf)]
	}
	buf = append(buf, tail...)
	enc.entry = entryWithVersion(kindRoute, rc.GetName(), buf, partsVersion(head, len(vhs), hashes, tail))
	return enc, nil
}

// virtualHostsField is RouteConfiguration.virtual_hosts's field number
// (envoy/config/route/v3/route.proto).
const virtualHostsField protowire.Number = 2

// rcFieldsAfterVirtualHosts is a message with rc's fields but name and
// virtual_hosts (sharing their values).
func rcFieldsAfterVirtualHosts(rc *routev3.RouteConfiguration) *routev3.RouteConfiguration {
	out := &routev3.RouteConfiguration{}
	dst := out.ProtoReflect()
	rc.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Number() > virtualHostsField {
			dst.Set(fd, v)
		}
		return true
	})
	return out
}

// sortedByName sorts es by name unless they are.
func sortedByName(es []*entry) []*entry {
	byName := func(a, b *entry) int { return strings.Compare(a.name, b.name) }
	if slices.IsSortedFunc(es, byName) {
		return es
	}
	es = slices.Clone(es)
	slices.SortFunc(es, byName)
	return es
}
