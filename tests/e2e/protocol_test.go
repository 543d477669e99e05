// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/dataplane"

	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
)

// The seed pool (appProtocol unset: HTTP/1.1) behind the seed HTTPRoute and
// a GRPCRoute, with HTTP/1.1-only model servers. Whatever core builds for
// the GRPCRoute, the HTTPRoute's requests must reach the model servers in
// HTTP/1.1: Envoy speaks h2c with prior knowledge to every host of a
// cluster whose HttpProtocolOptions say http2_protocol_options, and an
// HTTP/1.1-only server cannot answer that. The GRPCRoute's requests get the
// router's 500 (its backend is not served: gRPC cannot travel over
// HTTP/1.1) as a gRPC local reply: 200 with grpc-status 2 (UNKNOWN, Envoy's
// httpToGrpcStatus of 500) in a headers-only response.
func TestPoolSharedByHTTPRouteAndGRPCRouteKeepsHTTP1(t *testing.T) {
	server := backend(t, "model-server") // HTTP/1.1 only
	host, portStr, err := net.SplitHostPort(server.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portStr)
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	eppAddr := refused.Addr().(*net.TCPAddr)
	refused.Close() // the EPP is down; the seed pool is FailOpen

	gw := seedmodel.Gateway()
	pool := seedmodel.Pool()
	gw.Listeners[0].Routes = append(gw.Listeners[0].Routes, &model.Route{
		Kind: "GRPCRoute", Namespace: pool.Namespace, Name: "generate", Hostnames: []string{"grpc.ssup2.com"},
		Rules: []model.Rule{{
			GRPC: &gwv1.GRPCRouteRule{Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{
				Service: ptr.To("inference.v1.Generator"), Method: ptr.To("Generate"),
			}}}},
			Backends: []model.Backend{{Weight: 1, Pool: pool}},
		}},
	})
	res, err := core.BuildGateway(&gw, core.Inputs{Endpoints: map[string][]core.Endpoint{
		seedShadowCluster: {{Address: host, Port: uint32(port)}},
		seedEPPCluster:    {{Address: eppAddr.IP.String(), Port: uint32(eppAddr.Port)}},
	}}, core.Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	dp := newTestDP(t, dataplane.Options{})
	load(t, dp, resourcesOf(res)...)

	resp := get(t, dp, 80, "GET", "llm.ssup2.com", "/v1/models", nil)
	if resp.StatusCode != 200 || resp.Header.Get("x-seen-proto") != "HTTP/1.1" {
		t.Fatalf("HTTPRoute to the pool: %d %q, model server saw %q; want 200 over HTTP/1.1",
			resp.StatusCode, bodyOf(resp), resp.Header.Get("x-seen-proto"))
	}
	resp = get(t, dp, 80, "POST", "grpc.ssup2.com", "/inference.v1.Generator/Generate",
		http.Header{"Content-Type": {"application/grpc"}})
	if resp.StatusCode != 200 || resp.Header.Get("grpc-status") != "2" || resp.Header.Get("x-backend") != "" {
		t.Fatalf("GRPCRoute to the HTTP/1.1 pool: %d grpc-status %q %q from %q; want 200 grpc-status 2 from the proxy",
			resp.StatusCode, resp.Header.Get("grpc-status"), bodyOf(resp), resp.Header.Get("x-backend"))
	}
}
