// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/encoding/protowire"
)

// A route configuration's version is made from its parts rather than from
// its whole serialization: a Gateway's one RouteConfiguration per port
// holds every hostname's virtual host (3.5 MB at 10,000 routes), and
// hashing all of it on every route change cost more than the rest of the
// change. The input of the hash is
//
//	uvarint(len(head)) head uvarint(n) h(vh_1) ... h(vh_n) tail
//
// where head is the encoding of the fields numbered below virtual_hosts
// (the name), vh_j the encoding of the j-th virtual host, h its xxhash64 as
// 8 bytes little endian, and tail the encoding of the fields after
// virtual_hosts; the version is xxhash64 of that input as 16 hex digits.
// It is a function of the serialization (which determines its parts), so
// equal content has an equal version, also across restarts and whichever
// path serialized it: encodeRouteConfiguration keeps each virtual host's
// hash beside its bytes and hashes only the parts; routeConfigurationVersion
// parses whole bytes into the same parts.

// partsVersion is the version of a route configuration from its parts:
// head, its n virtual hosts' hashes and tail.
func partsVersion(head []byte, n int, hashes, tail []byte) string {
	var d xxhash.Digest
	d.Reset()
	var num [binary.MaxVarintLen64]byte
	_, _ = d.Write(binary.AppendUvarint(num[:0], uint64(len(head))))
	_, _ = d.Write(head)
	_, _ = d.Write(binary.AppendUvarint(num[:0], uint64(n)))
	_, _ = d.Write(hashes)
	_, _ = d.Write(tail)
	return hashHex(d.Sum64())
}

// routeConfigurationVersion is the version of the route configuration
// serialized as b (marshalOpts' output), its parts read from the bytes.
// Bytes that do not parse as a message (never marshalOpts' output) get the
// hash of the whole.
func routeConfigurationVersion(b []byte) string {
	var head, hashes, tail []byte
	n := 0
	for rest := b; len(rest) > 0; {
		num, typ, tn := protowire.ConsumeTag(rest)
		if tn < 0 {
			return hashHex(xxhash.Sum64(b))
		}
		fn := protowire.ConsumeFieldValue(num, typ, rest[tn:])
		if fn < 0 {
			return hashHex(xxhash.Sum64(b))
		}
		switch {
		case num < virtualHostsField:
			head = append(head, rest[:tn+fn]...)
		case num == virtualHostsField && typ == protowire.BytesType:
			vh, _ := protowire.ConsumeBytes(rest[tn:])
			hashes = binary.LittleEndian.AppendUint64(hashes, xxhash.Sum64(vh))
			n++
		default:
			tail = append(tail, rest[:tn+fn]...)
		}
		rest = rest[tn+fn:]
	}
	return partsVersion(head, n, hashes, tail)
}
