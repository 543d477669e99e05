// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/test/dataplane"
)

// fdsProcessor is an ext_proc server for FULL_DUPLEX_STREAMED request
// bodies: it reads the request (headers, and the body to its end), then
// answers the headers with onRequest's mutation and metadata and streams
// the body back unchanged; response headers get an empty answer and
// response body chunks are streamed back. streams counts the streams it
// served and seen records each request's headers as it got them.
type fdsProcessor struct {
	extprocsvc.UnimplementedExternalProcessorServer
	onRequest func(hdrs map[string]string, body []byte) (*extprocsvc.HeaderMutation, *structpb.Struct, bool)
	streams   atomic.Int64
	mu        sync.Mutex
	seen      []map[string]string
}

func (p *fdsProcessor) Process(s extprocsvc.ExternalProcessor_ProcessServer) error {
	p.streams.Add(1)
	var hdrs map[string]string
	var body []byte
	answer := func(withBody bool) error {
		mut, md, clear := p.onRequest(hdrs, body)
		if err := s.Send(&extprocsvc.ProcessingResponse{
			Response: &extprocsvc.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocsvc.HeadersResponse{
				Response: &extprocsvc.CommonResponse{HeaderMutation: mut, ClearRouteCache: clear}}},
			DynamicMetadata: md,
		}); err != nil || !withBody {
			return err
		}
		return s.Send(&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_RequestBody{
			RequestBody: &extprocsvc.BodyResponse{Response: &extprocsvc.CommonResponse{BodyMutation: &extprocsvc.BodyMutation{
				Mutation: &extprocsvc.BodyMutation_StreamedResponse{StreamedResponse: &extprocsvc.StreamedBodyResponse{Body: body, EndOfStream: true}}}}}}})
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return nil
		}
		var out *extprocsvc.ProcessingResponse
		switch v := m.GetRequest().(type) {
		case *extprocsvc.ProcessingRequest_RequestHeaders:
			hdrs = map[string]string{}
			for _, h := range v.RequestHeaders.GetHeaders().GetHeaders() {
				hdrs[h.GetKey()] = string(h.GetRawValue())
			}
			p.mu.Lock()
			p.seen = append(p.seen, hdrs)
			p.mu.Unlock()
			if v.RequestHeaders.GetEndOfStream() {
				if err := answer(false); err != nil {
					return nil
				}
			}
		case *extprocsvc.ProcessingRequest_RequestBody:
			body = append(body, v.RequestBody.GetBody()...)
			if v.RequestBody.GetEndOfStream() {
				if err := answer(true); err != nil {
					return nil
				}
			}
		case *extprocsvc.ProcessingRequest_RequestTrailers:
			if err := answer(true); err != nil {
				return nil
			}
		case *extprocsvc.ProcessingRequest_ResponseHeaders:
			out = &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{}}}
		case *extprocsvc.ProcessingRequest_ResponseBody:
			out = &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseBody{ResponseBody: &extprocsvc.BodyResponse{
				Response: &extprocsvc.CommonResponse{BodyMutation: &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_StreamedResponse{
					StreamedResponse: &extprocsvc.StreamedBodyResponse{Body: v.ResponseBody.GetBody(), EndOfStream: v.ResponseBody.GetEndOfStream()}}}}}}}
		case *extprocsvc.ProcessingRequest_ResponseTrailers:
			out = &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocsvc.TrailersResponse{}}}
		}
		if out != nil {
			if err := s.Send(out); err != nil {
				return nil
			}
		}
	}
}

func setHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}}
}

// bbrLike copies the body's "model" into X-Gateway-Model-Name with
// clear_route_cache, as GIE's body-based router does with --streaming,
// and also tries to move the request to another Host and to set an
// x-envoy header, which must never take effect; a body without a model
// gets an empty answer.
func bbrLike() *fdsProcessor {
	return &fdsProcessor{onRequest: func(_ map[string]string, body []byte) (*extprocsvc.HeaderMutation, *structpb.Struct, bool) {
		var b struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(body, &b) != nil || b.Model == "" {
			return nil, nil, false
		}
		return &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			setHeader("X-Gateway-Model-Name", b.Model), setHeader(":authority", "b.example.com"), setHeader("host", "b.example.com"),
			setHeader("x-envoy-original-path", "/elsewhere"),
		}}, nil, true
	}}
}

// pickingFDSEPP picks pick, as header and envoy.lb metadata (GIE EPP
// protocol), route cache retained.
func pickingFDSEPP(pick string) *fdsProcessor {
	return &fdsProcessor{onRequest: func(map[string]string, []byte) (*extprocsvc.HeaderMutation, *structpb.Struct, bool) {
		inner, _ := structpb.NewStruct(map[string]any{"x-gateway-destination-endpoint": pick})
		return &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("x-gateway-destination-endpoint", pick)}},
			&structpb.Struct{Fields: map[string]*structpb.Value{"envoy.lb": structpb.NewStructValue(inner)}}, false
	}}
}

func serveProcessor(t *testing.T, p extprocsvc.ExternalProcessorServer) (addr string, stop func()) {
	t.Helper()
	gs := grpc.NewServer()
	extprocsvc.RegisterExternalProcessorServer(gs, p)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String(), gs.Stop
}

func modelRule(name string, b model.Backend) model.Rule {
	return model.Rule{HTTP: &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{
		Headers: []gwv1.HTTPHeaderMatch{{Type: ptr.To(gwv1.HeaderMatchExact), Name: "X-Gateway-Model-Name", Value: name}},
	}}}, Backends: []model.Backend{b}}
}

// listenerFilterGateway: listener "a" (a.example.com) with the BBR-like
// filter, routes by X-Gateway-Model-Name to pools m1 and m2; listener "b"
// (b.example.com) on the same port, no filter, one route by the same
// header to Service svc-b and a catch-all to Service svc-b2.
func listenerFilterGateway(failOpen bool) model.Gateway {
	p1 := seedmodel.PoolBackend("ns", "m1", "m1-ip-00000001", "FailClose")
	p2 := seedmodel.PoolBackend("ns", "m2", "m2-ip-00000002", "FailClose")
	ra := &model.Route{Kind: "HTTPRoute", Namespace: "ns", Name: "ra", Rules: []model.Rule{
		modelRule("m1", model.Backend{Weight: 1, Pool: p1}), modelRule("m2", model.Backend{Weight: 1, Pool: p2}),
	}}
	if failOpen {
		// Requests without a model header go to pool m1 (FailOpen: the
		// router failed, the request is routed without the header).
		ra.Rules = append(ra.Rules, model.Rule{HTTP: &gwv1.HTTPRouteRule{}, Backends: []model.Backend{{Weight: 1, Pool: p1}}})
	}
	for i := range ra.Rules {
		ra.Rules[i].Index = i
	}
	svcB := &model.ServiceBackend{Host: "svc-b.ns.svc.cluster.local", Port: 80}
	svcB2 := &model.ServiceBackend{Host: "svc-b2.ns.svc.cluster.local", Port: 80}
	rb := &model.Route{Kind: "HTTPRoute", Namespace: "nb", Name: "rb", Rules: []model.Rule{
		modelRule("m1", model.Backend{Weight: 1, Service: svcB}),
		{Index: 1, HTTP: &gwv1.HTTPRouteRule{}, Backends: []model.Backend{{Weight: 1, Service: svcB2}}},
	}}
	bbr := &model.ExternalProcessor{Namespace: "ns", Name: "bbr", Host: "bbr.ns.svc.cluster.local", Port: 9004,
		RequestHeaders: true, RequestBodyStreamed: true, FailOpen: failOpen}
	return model.Gateway{Namespace: "gateway-namespace", Name: "gateway", Listeners: []model.Listener{
		{Name: "a", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: "a.example.com", Routes: []*model.Route{ra},
			Filters: []model.ListenerFilter{{Type: gwv1.ListenerFilterExtensionRef, Processor: bbr}}},
		{Name: "b", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: "b.example.com", Routes: []*model.Route{rb}},
	}}
}

func postModel(t *testing.T, dp *dataplane.DataPlane, host, body string, hdr http.Header) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+dp.Addr(80).String()+"/v1/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header[k] = v
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// Pre-routing listener filters as Envoy runs them, end to end from pilot's
// xDS: the BBR-like filter of listener a reads the body, its header
// selects the pool (route selection after the filter), whose EPP picks
// the pod; its attempt to change Host never takes effect (the request
// stays on listener a); a client's own X-Gateway-Model-Name never selects
// anything, on either listener; the filter never runs for listener b,
// which shares the port and the connection manager.
func TestEndToEndListenerFilter(t *testing.T) {
	ctx := testCtx(t)
	servers := map[string]string{}
	for _, n := range []string{"10.244.1.1:8000", "10.244.1.2:8000", "10.244.2.1:8000", "10.244.2.2:8000", "10.244.3.1:80", "10.244.3.2:80"} {
		servers[n] = backend(t, n).Listener.Addr().String()
	}
	bbr, epp1, epp2 := bbrLike(), pickingFDSEPP("10.244.1.2:8000"), pickingFDSEPP("10.244.2.1:8000")
	servers["10.244.0.9:9004"], _ = serveProcessor(t, bbr)
	servers["10.244.0.1:9002"], _ = serveProcessor(t, epp1)
	servers["10.244.0.2:9002"], _ = serveProcessor(t, epp2)

	gw := listenerFilterGateway(false)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	eps := []model.ClusterEndpoints{
		{Cluster: "outbound|54321||m1-ip-00000001.ns.svc.cluster.local", Endpoints: []model.Endpoint{{Address: "10.244.1.1", Port: 8000}, {Address: "10.244.1.2", Port: 8000}}},
		{Cluster: "outbound|54321||m2-ip-00000002.ns.svc.cluster.local", Endpoints: []model.Endpoint{{Address: "10.244.2.1", Port: 8000}, {Address: "10.244.2.2", Port: 8000}}},
		{Cluster: "outbound|9002||m1-epp.ns.svc.cluster.local", Endpoints: []model.Endpoint{{Address: "10.244.0.1", Port: 9002}}},
		{Cluster: "outbound|9002||m2-epp.ns.svc.cluster.local", Endpoints: []model.Endpoint{{Address: "10.244.0.2", Port: 9002}}},
		{Cluster: "outbound|9004||bbr.ns.svc.cluster.local", Endpoints: []model.Endpoint{{Address: "10.244.0.9", Port: 9004}}},
		{Cluster: "outbound|80||svc-b.ns.svc.cluster.local", Endpoints: []model.Endpoint{{Address: "10.244.3.1", Port: 80}}},
		{Cluster: "outbound|80||svc-b2.ns.svc.cluster.local", Endpoints: []model.Endpoint{{Address: "10.244.3.2", Port: 80}}},
	}
	serveXDS(t, lis, gw, eps)
	dp := runDP(t, testBootstrap(t, lis.Addr().String(), false), servers, dataplane.Options{MaxBackoff: 100 * time.Millisecond})
	if err := dp.WaitFor(ctx, func(s dataplane.Snapshot) bool {
		return s.Listeners["0.0.0.0_80"] != nil && len(s.Endpoints["outbound|9004||bbr.ns.svc.cluster.local"]) == 1 &&
			len(s.Endpoints["outbound|80||svc-b2.ns.svc.cluster.local"]) == 1
	}); err != nil {
		t.Fatalf("%v; last NACK %+v", err, dp.Snapshot().LastNACK)
	}

	for _, tc := range []struct {
		name, host, body string
		hdr              http.Header
		status           int
		backend          string
	}{
		{"model m1 to the pod pool m1's EPP picked", "a.example.com", `{"model":"m1","prompt":"hi"}`, nil, 200, "10.244.1.2:8000"},
		{"model m2 to the pod pool m2's EPP picked", "a.example.com", `{"model":"m2","prompt":"hi"}`, nil, 200, "10.244.2.1:8000"},
		{"the client's header does not beat the body", "a.example.com", `{"model":"m2"}`, http.Header{"X-Gateway-Model-Name": {"m1"}}, 200, "10.244.2.1:8000"},
		{"an unknown model is a 404", "a.example.com", `{"model":"nope"}`, nil, 404, ""},
		{"no model, a forged header: 404, not pool m1", "a.example.com", `{"prompt":"hi"}`, http.Header{"X-Gateway-Model-Name": {"m1"}}, 404, ""},
		{"listener b: a forged header selects nothing", "b.example.com", `{"model":"m1"}`, http.Header{"X-Gateway-Model-Name": {"m1"}}, 200, "10.244.3.2:80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := postModel(t, dp, tc.host, tc.body, tc.hdr)
			if status != tc.status || (tc.backend != "" && body != tc.backend) {
				t.Fatalf("%d %q, want %d from %q", status, body, tc.status, tc.backend)
			}
		})
	}
	if got := bbr.streams.Load(); got != 5 {
		t.Errorf("the listener filter served %d streams, want 5 (listener a's requests only)", got)
	}
	// The EPP saw the request as the filter left it: the model header
	// set, Host and x-envoy headers unchanged.
	epp1.mu.Lock()
	var seen map[string]string
	if len(epp1.seen) > 0 {
		seen = epp1.seen[0]
	}
	epp1.mu.Unlock()
	if seen[":authority"] != "a.example.com" || seen["x-gateway-model-name"] != "m1" || seen["x-envoy-original-path"] != "" {
		t.Errorf("EPP m1 saw %v: want :authority a.example.com, x-gateway-model-name m1, no x-envoy-original-path", seen)
	}
	if got := dp.Snapshot().Counters.NACKs; got != 0 {
		t.Fatalf("NACKs %d: %+v", got, dp.Snapshot().LastNACK)
	}
	if _, err := core.BuildGateway(&gw, core.Inputs{}, core.Options{InferenceEnabled: true}); err != nil {
		t.Fatal(err)
	}
}

// The filter's failure mode when the router's Service has no endpoint
// (Envoy cannot start the stream, before any body reached it):
// FailClose answers 500; FailOpen routes the request as it came, without
// the header (here to the default rule, pool m1).
func TestEndToEndListenerFilterFailureMode(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		t.Run(map[bool]string{false: "FailClose", true: "FailOpen"}[failOpen], func(t *testing.T) {
			ctx := testCtx(t)
			servers := map[string]string{}
			for _, n := range []string{"10.244.1.1:8000", "10.244.1.2:8000"} {
				servers[n] = backend(t, n).Listener.Addr().String()
			}
			servers["10.244.0.1:9002"], _ = serveProcessor(t, pickingFDSEPP("10.244.1.1:8000"))
			gw := listenerFilterGateway(failOpen)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			serveXDS(t, lis, gw, []model.ClusterEndpoints{
				{Cluster: "outbound|54321||m1-ip-00000001.ns.svc.cluster.local", Endpoints: []model.Endpoint{{Address: "10.244.1.1", Port: 8000}, {Address: "10.244.1.2", Port: 8000}}},
				{Cluster: "outbound|9002||m1-epp.ns.svc.cluster.local", Endpoints: []model.Endpoint{{Address: "10.244.0.1", Port: 9002}}},
			})
			dp := runDP(t, testBootstrap(t, lis.Addr().String(), false), servers, dataplane.Options{MaxBackoff: 100 * time.Millisecond})
			if err := dp.WaitFor(ctx, func(s dataplane.Snapshot) bool {
				return s.Listeners["0.0.0.0_80"] != nil && len(s.Endpoints["outbound|9002||m1-epp.ns.svc.cluster.local"]) == 1
			}); err != nil {
				t.Fatalf("%v; last NACK %+v", err, dp.Snapshot().LastNACK)
			}
			status, body, _ := postModel(t, dp, "a.example.com", `{"model":"m2"}`, nil)
			if failOpen {
				if status != 200 || body != "10.244.1.1:8000" {
					t.Fatalf("FailOpen: %d %q, want 200 from pool m1's pick", status, body)
				}
			} else if status != 500 {
				t.Fatalf("FailClose: %d %q, want 500", status, body)
			}
		})
	}
}
