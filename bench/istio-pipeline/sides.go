// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"context"
	"net"

	discoveryv1 "k8s.io/api/discovery/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// Side is one control plane under test.
type Side struct {
	Name string
	// Prepare builds the side's fake API server holding in's objects. It is
	// neither timed nor part of the live heap figure: it stands for the
	// cluster, not for the control plane.
	Prepare func(in *Inputs) (Instance, error)
}

// Instance is one control plane over one fake API server.
type Instance interface {
	// Start builds the control plane over its API server and starts it;
	// it returns once ADS can be dialled (the configuration may not be
	// ready yet: proxies wait for it).
	Start() error
	// Dial connects to the ADS server in process.
	Dial() (*grpc.ClientConn, error)
	// UpdateHTTPRoute and UpdateEndpointSlice write through the fake API
	// server, as a user or kube-controller-manager would.
	UpdateHTTPRoute(r *gwv1.HTTPRoute) error
	UpdateEndpointSlice(s *discoveryv1.EndpointSlice) error
	// Busy reports work the control plane knows it has pending (Istio:
	// config updates not yet in a push context); the settle wait also
	// watches CPU and the streams.
	Busy() bool
	// Close stops everything the instance started.
	Close()
}

// Sides are the two control planes, Istio first.
func Sides() []Side { return []Side{IstioSide(), OurSide(nil)} }

// dialBufconn dials an in-process listener with limits large enough for
// one response carrying every cluster of 10,000 pools.
func dialBufconn(l *bufconn.Listener) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30), grpc.MaxCallSendMsgSize(1<<30)),
	)
}
