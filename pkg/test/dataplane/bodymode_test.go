// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// lweppV160 answers as lwepp v1.6.0 (conformance.md §5): a request with a
// body gets its headers response only with the body's last chunk, and
// every chunk a body response with an empty CommonResponse; the pick is
// pick, as header and envoy.lb metadata.
type lweppV160 struct {
	extprocsvc.UnimplementedExternalProcessorServer
	pick string
}

func (p *lweppV160) Process(s extprocsvc.ExternalProcessor_ProcessServer) error {
	inner, _ := structpb.NewStruct(map[string]any{"x-gateway-destination-endpoint": p.pick})
	headers := &extprocsvc.ProcessingResponse{
		Response: &extprocsvc.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocsvc.HeadersResponse{
			Response: &extprocsvc.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocsvc.HeaderMutation{
				SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-gateway-destination-endpoint", RawValue: []byte(p.pick)}}},
			}}}},
		DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{"envoy.lb": structpb.NewStructValue(inner)}},
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return nil
		}
		var out []*extprocsvc.ProcessingResponse
		switch v := m.GetRequest().(type) {
		case *extprocsvc.ProcessingRequest_RequestHeaders:
			if v.RequestHeaders.GetEndOfStream() {
				out = append(out, headers)
			}
		case *extprocsvc.ProcessingRequest_RequestBody:
			if v.RequestBody.GetEndOfStream() {
				out = append(out, headers)
			}
			out = append(out, &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_RequestBody{
				RequestBody: &extprocsvc.BodyResponse{Response: &extprocsvc.CommonResponse{}}}})
		case *extprocsvc.ProcessingRequest_ResponseHeaders:
			out = append(out, &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseHeaders{
				ResponseHeaders: &extprocsvc.HeadersResponse{}}})
		case *extprocsvc.ProcessingRequest_ResponseBody:
			out = append(out, &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseBody{
				ResponseBody: &extprocsvc.BodyResponse{Response: &extprocsvc.CommonResponse{}}}})
		}
		for _, o := range out {
			if err := s.Send(o); err != nil {
				return nil
			}
		}
	}
}

// pilot's xDS for the seed Gateway with each EPP body mode, against an EPP
// answering as lwepp v1.6.0: in the default FULL_DUPLEX_STREAMED mode a
// POST with a body fails with 500 (Envoy's "spurious message",
// kubernetes-sigs/gateway-api-inference-extension#3035) and a GET
// whose response has a body is reset; with
// eppRequestBodyMode Streamed both reach the endpoint the EPP picked.
func TestEndToEndEPPBodyModes(t *testing.T) {
	const pick = "10.244.0.14:8000"
	for _, tc := range []struct {
		mode     model.EPPBodyMode
		wantPOST int
	}{
		{model.EPPBodyModeFullDuplexStreamed, 500},
		{model.EPPBodyModeStreamed, 200},
	} {
		t.Run(map[model.EPPBodyMode]string{"": "FullDuplexStreamed", "Streamed": "Streamed"}[tc.mode], func(t *testing.T) {
			ctx := testCtx(t)
			servers := map[string]string{}
			for _, n := range []string{"10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000"} {
				servers[n] = backend(t, n).Listener.Addr().String()
			}
			gs := grpc.NewServer()
			extprocsvc.RegisterExternalProcessorServer(gs, &lweppV160{pick: pick})
			eppLis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = gs.Serve(eppLis) }()
			t.Cleanup(gs.Stop)
			servers["10.244.0.16:9002"] = eppLis.Addr().String()

			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			gw := seedGateway()
			gw.EPPBodyMode = tc.mode
			serveXDS(t, lis, gw, []model.ClusterEndpoints{
				{Cluster: seedShadowCluster, Endpoints: []model.Endpoint{
					{Address: "10.244.0.13", Port: 8000}, {Address: "10.244.0.14", Port: 8000}, {Address: "10.244.0.15", Port: 8000},
				}},
				{Cluster: seedEPPCluster, Endpoints: []model.Endpoint{{Address: "10.244.0.16", Port: 9002}}},
			})
			dp := runDP(t, testBootstrap(t, lis.Addr().String(), false), servers, Options{MaxBackoff: 100 * time.Millisecond})
			if err := dp.WaitFor(ctx, func(s Snapshot) bool {
				return s.Listeners["0.0.0.0_80"] != nil && len(s.Endpoints[seedShadowCluster]) == 3 && len(s.Endpoints[seedEPPCluster]) == 1
			}); err != nil {
				t.Fatalf("%v; last NACK %+v", err, dp.Snapshot().LastNACK)
			}

			getStatus, getBody, getErr := send(dp, "GET", "")
			postStatus, postBody, postErr := send(dp, "POST", `{"prompt":"hi"}`)
			if tc.mode == model.EPPBodyModeStreamed {
				if getErr != nil || getStatus != 200 || getBody != pick || postErr != nil || postStatus != 200 || postBody != pick {
					t.Fatalf("GET %d %q %v, POST %d %q %v; want both 200 from %s", getStatus, getBody, getErr, postStatus, postBody, postErr, pick)
				}
			} else {
				// The response body is FULL_DUPLEX_STREAMED too: lwepp's empty
				// response body reply is spurious once the response has
				// started, so even a GET is reset
				// (kubernetes-sigs/gateway-api-inference-extension#3028); the POST
				// fails before the upstream with 500
				// (kubernetes-sigs/gateway-api-inference-extension#3035).
				if getErr == nil || postErr != nil || postStatus != 500 {
					t.Fatalf("GET %d %q %v, POST %d %q %v; want the GET reset and the POST 500", getStatus, getBody, getErr, postStatus, postBody, postErr)
				}
			}
			if s := dp.Snapshot(); s.Counters.NACKs != 0 {
				t.Fatalf("NACK %+v", s.LastNACK)
			}
		})
	}
}

// send sends one request with body (none when "") to the seed host.
func send(dp *DataPlane, method, body string) (int, string, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+dp.Addr(80).String()+"/v1/completions", rd)
	if err != nil {
		return 0, "", err
	}
	req.Host = "llm.ssup2.com"
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
