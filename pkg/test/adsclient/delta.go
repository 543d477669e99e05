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

// Delta is an incremental ADS stream (DeltaAggregatedResources) of one
// node.
type Delta struct {
	*reader[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
}

var deltaKind = kind[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse, *Delta]{
	start:   discoveryv3.AggregatedDiscoveryServiceClient.DeltaAggregatedResources,
	setNode: func(q *discoveryv3.DeltaDiscoveryRequest, n *corev3.Node) { q.Node = n },
	describe: func(m *discoveryv3.DeltaDiscoveryResponse) string {
		return fmt.Sprintf("a %s delta response with %d resources, removed %v", m.GetTypeUrl(), len(m.GetResources()), m.GetRemovedResources())
	},
	wrap: func(r *reader[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]) (*Delta, func(*discoveryv3.DeltaDiscoveryResponse) error) {
		d := &Delta{reader: r}
		return d, d.ACK
	},
}

// Subscribe adds names of typeURL to the subscription (none: the first
// request of a wildcard subscription). A send may fail once the server
// has ended the stream; Recv then returns the stream's status.
func (d *Delta) Subscribe(typeURL string, names ...string) error {
	return d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: names})
}

// ACK accepts r (its nonce).
func (d *Delta) ACK(r *discoveryv3.DeltaDiscoveryResponse) error {
	return d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
}

// NACK rejects r with message: its nonce and an error detail
// (InvalidArgument, message).
func (d *Delta) NACK(r *discoveryv3.DeltaDiscoveryResponse, message string) error {
	return d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: message}})
}
