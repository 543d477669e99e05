// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package adsclient

import (
	"context"
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Delta is an incremental ADS stream (DeltaAggregatedResources) of one
// node.
type Delta struct {
	*reader[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
}

// OpenDelta opens a delta stream for node on conn; it ends with ctx, after
// Within, or at Close.
func OpenDelta(ctx context.Context, conn *grpc.ClientConn, node *corev3.Node, opts ...StreamOption) (*Delta, error) {
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	r, err := open(ctx, node, opts, func(ctx context.Context, o ...grpc.CallOption) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error) {
		return ads.DeltaAggregatedResources(ctx, o...)
	})
	if err != nil {
		return nil, err
	}
	r.setNode = func(q *discoveryv3.DeltaDiscoveryRequest, n *corev3.Node) { q.Node = n }
	r.describe = func(m *discoveryv3.DeltaDiscoveryResponse) string {
		return fmt.Sprintf("a %s delta response with %d resources, removed %v", m.GetTypeUrl(), len(m.GetResources()), m.GetRemovedResources())
	}
	d := &Delta{reader: r}
	r.run(d.ACK)
	return d, nil
}

// NewDelta is OpenDelta for a test: it fails the test when the stream
// cannot be opened and closes the stream at the test's end.
func NewDelta(t testing.TB, conn *grpc.ClientConn, node *corev3.Node, opts ...StreamOption) *Delta {
	t.Helper()
	d, err := OpenDelta(context.Background(), conn, node, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
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
