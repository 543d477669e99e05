// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net"
	"strconv"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/dataplane"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// grpcGateway is the seed Gateway with one GRPCRoute, grpc.example.com, whose
// only rule sends grpc.health.v1.Health/Check to an h2c Service served by a
// real gRPC server; it returns the data plane with that configuration.
func grpcGateway(t *testing.T) *dataplane.DataPlane {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer()) // "" is SERVING
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	host, portStr, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portStr)

	gw := seedGateway()
	svc := &model.ServiceBackend{Host: "echo.grpc.svc.cluster.local", Port: 8080, HTTP2: true}
	gw.Listeners[0].Routes = []*model.Route{{
		Kind: "GRPCRoute", Namespace: "grpc", Name: "health", Hostnames: []string{"grpc.example.com"},
		Rules: []model.Rule{{
			GRPC: &gwv1.GRPCRouteRule{Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{
				Service: ptr.To("grpc.health.v1.Health"), Method: ptr.To("Check"),
			}}}},
			Backends: []model.Backend{{Weight: 1, Service: svc}},
		}},
	}}
	res, err := core.BuildGateway(&gw, core.Inputs{Endpoints: map[string][]core.Endpoint{
		"outbound|8080||echo.grpc.svc.cluster.local": {{Address: host, Port: uint32(port)}},
	}}, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dp := newTestDP(t, dataplane.Options{})
	load(t, dp, resourcesOf(res)...)
	return dp
}

func grpcClient(t *testing.T, dp *dataplane.DataPlane) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(dp.Addr(80).String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// A unary RPC through a GRPCRoute gets the backend's answer and its
// status, which gRPC carries in the response trailers: Envoy's router
// forwards the upstream's trailers downstream (Router::Filter::
// onUpstreamTrailers, then encodeTrailers), so the client sees OK.
func TestGRPCRouteCarriesTrailers(t *testing.T) {
	dp := grpcGateway(t)
	var trailer metadata.MD
	resp, err := grpcClient(t, dp).Check(testCtx(t), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if err != nil {
		t.Fatalf("Check through the data plane: %v", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("status %v, want SERVING", resp.GetStatus())
	}
	// The backend's own error status travels in trailers too: an unknown
	// service is NotFound from the health server, not from the data plane.
	_, err = grpcClient(t, dp).Check(testCtx(t), &healthpb.HealthCheckRequest{Service: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Check of an unknown service: %v, want the backend's NotFound", err)
	}
}

// A gRPC request no route matches gets Envoy's local reply in gRPC form:
// for a request whose content-type is application/grpc, sendLocalReply
// answers HTTP 200 with grpc-status from Grpc::Utility::httpToGrpcStatus
// (404 -> 12, UNIMPLEMENTED) and grpc-message, headers only
// (source/common/http/utility.cc, Utility::sendLocalReply). The Gateway
// API's GRPCRoute tests expect Unimplemented for an unmatched method.
func TestGRPCUnmatchedMethodIsUnimplemented(t *testing.T) {
	dp := grpcGateway(t)
	c := grpcClient(t, dp)
	stream, err := c.Watch(testCtx(t), &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("Watch (no route matches): %v, want Unimplemented", err)
	}
}
