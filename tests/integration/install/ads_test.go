// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package install_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// adsConn dials the ADS address over TLS, trusting only caPool and checking
// the certificate is adsServerName's.
func adsConn(t *testing.T, addr string, caPool *x509.CertPool) *grpc.ClientConn {
	t.Helper()
	creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: caPool, ServerName: adsServerName})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// adsStream is one state-of-the-world ADS stream of a proxy of the seed
// Gateway, sending token (when not empty) as "authorization: Bearer".
type adsStream struct {
	t      *testing.T
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	id     string
}

// openADS opens the stream; it ends when within has passed or the test ends.
func openADS(t *testing.T, conn *grpc.ClientConn, id, token string, within time.Duration) *adsStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &adsStream{t: t, stream: s, id: id}
}

// request asks for typeURL (names empty: all), ACKing prev when not nil.
// Sending may fail once the server has ended the stream; Recv then returns
// the stream's status, which is what callers check.
func (a *adsStream) request(typeURL string, prev *discoveryv3.DiscoveryResponse, names ...string) {
	req := &discoveryv3.DiscoveryRequest{
		Node:    proxyNode(a.id),
		TypeUrl: typeURL, ResourceNames: names,
	}
	if prev != nil {
		req.VersionInfo, req.ResponseNonce = prev.GetVersionInfo(), prev.GetNonce()
	}
	_ = a.stream.Send(req)
}

// clusters reads CDS responses (ACKing each) until one holds want, and
// returns that response's clusters by name.
func (a *adsStream) clusters(want string) map[string]*clusterv3.Cluster {
	a.t.Helper()
	a.request(resource.ClusterType, nil)
	for {
		r, err := a.stream.Recv()
		if err != nil {
			a.t.Fatalf("%s: CDS: %v", a.id, err)
		}
		got := map[string]*clusterv3.Cluster{}
		for _, res := range r.GetResources() {
			c := &clusterv3.Cluster{}
			if err := res.UnmarshalTo(c); err != nil {
				a.t.Fatal(err)
			}
			if err := c.ValidateAll(); err != nil {
				a.t.Errorf("cluster %s: %v", c.GetName(), err)
			}
			got[c.GetName()] = c
		}
		a.request(resource.ClusterType, r)
		if got[want] != nil {
			return got
		}
	}
}

// endpoints subscribes to EDS for cluster and reads responses (ACKing each)
// until its ClusterLoadAssignment has n endpoints; it returns them as
// address:port, sorted.
func (a *adsStream) endpoints(cluster string, n int) []string {
	a.t.Helper()
	a.request(resource.EndpointType, nil, cluster)
	for {
		r, err := a.stream.Recv()
		if err != nil {
			a.t.Fatalf("%s: EDS: %v", a.id, err)
		}
		var addrs []string
		for _, res := range r.GetResources() {
			cla := &endpointv3.ClusterLoadAssignment{}
			if err := res.UnmarshalTo(cla); err != nil {
				a.t.Fatal(err)
			}
			if cla.GetClusterName() != cluster {
				continue
			}
			for _, l := range cla.GetEndpoints() {
				for _, e := range l.GetLbEndpoints() {
					sa := e.GetEndpoint().GetAddress().GetSocketAddress()
					addrs = append(addrs, net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))))
				}
			}
		}
		a.request(r.GetTypeUrl(), r, cluster)
		if len(addrs) >= n {
			slices.Sort(addrs)
			return addrs
		}
	}
}

// denied asks for CDS and checks that the stream ends with code before any
// response arrives.
func (a *adsStream) denied(code codes.Code) {
	a.t.Helper()
	a.request(resource.ClusterType, nil)
	r, err := a.stream.Recv()
	if err == nil {
		a.t.Fatalf("%s: got a %s response with %d resources, want the stream to end with %s",
			a.id, r.GetTypeUrl(), len(r.GetResources()), code)
	}
	st, _ := status.FromError(err)
	if st.Code() != code {
		a.t.Fatalf("%s: stream ended with %v, want code %s", a.id, err, code)
	}
}

// proxyNode is the xDS node of a proxy of the seed Gateway: its metadata
// names the Gateway, as a Gateway deployment's Envoy does.
func proxyNode(id string) *corev3.Node {
	md, err := structpb.NewStruct(map[string]any{
		xds.MetadataGatewayNamespace: seed.GatewayNamespace, xds.MetadataGatewayName: seed.GatewayName,
	})
	if err != nil {
		panic(err) // two strings always convert
	}
	return &corev3.Node{Id: id, Metadata: md}
}
