// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package adsclient

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
)

// SotW is a state-of-the-world ADS stream (StreamAggregatedResources) of
// one node. It keeps, per type, the names last requested, which every
// ACK and NACK of that type repeats (a SotW request states the whole
// subscription), and the version last ACKed, which a NACK carries.
type SotW struct {
	*reader[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	names map[string][]string
	acked map[string]string
}

var sotwKind = kind[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse, *SotW]{
	start:   discoveryv3.AggregatedDiscoveryServiceClient.StreamAggregatedResources,
	setNode: func(q *discoveryv3.DiscoveryRequest, n *corev3.Node) { q.Node = n },
	describe: func(m *discoveryv3.DiscoveryResponse) string {
		return fmt.Sprintf("a %s response version %s with %d resources", m.GetTypeUrl(), m.GetVersionInfo(), len(m.GetResources()))
	},
	wrap: func(r *reader[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]) (*SotW, func(*discoveryv3.DiscoveryResponse) error) {
		s := &SotW{reader: r, names: map[string][]string{}, acked: map[string]string{}}
		return s, s.ACK
	},
}

// Request asks for typeURL's resources names (none: all of them, a
// wildcard), with no version or nonce. A send may fail once the server
// has ended the stream; Recv then returns the stream's status.
func (s *SotW) Request(typeURL string, names ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names[typeURL] = names
	return s.sendLocked(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names})
}

// ACK accepts r: its version and nonce, with the names last requested of
// its type.
func (s *SotW) ACK(r *discoveryv3.DiscoveryResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked[r.GetTypeUrl()] = r.GetVersionInfo()
	return s.sendLocked(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(),
		ResponseNonce: r.GetNonce(), ResourceNames: s.names[r.GetTypeUrl()]})
}

// NACK rejects r with message: its nonce, the version last ACKed of its
// type (none: ""), the type's names, and an error detail (InvalidArgument,
// message).
func (s *SotW) NACK(r *discoveryv3.DiscoveryResponse, message string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sendLocked(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: s.acked[r.GetTypeUrl()],
		ResponseNonce: r.GetNonce(), ResourceNames: s.names[r.GetTypeUrl()],
		ErrorDetail: &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: message}})
}
