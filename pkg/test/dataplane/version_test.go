// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// syncLog is a slog destination tests read back.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) lines(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

func buildVersion(major, minor, patch uint32) *corev3.Node {
	return &corev3.Node{
		UserAgentName: "envoy",
		UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
			Version: &typev3.SemanticVersion{MajorNumber: major, MinorNumber: minor, Patch: patch},
		}},
	}
}

// The node declares the version the data plane behaves as, as Envoy fills
// user_agent_name and user_agent_build_version (source/server/server.cc);
// the bootstrap's own node fields stay.
func TestDeclaredNode(t *testing.T) {
	declared := func(opts Options) *corev3.Node {
		t.Helper()
		dp, err := New(testBootstrap(t, "127.0.0.1:1", false), opts)
		if err != nil {
			t.Fatal(err)
		}
		return dp.target.node
	}
	for ver, want := range map[string]*corev3.Node{
		"":       buildVersion(1, 40, 0),
		"1.37.3": buildVersion(1, 37, 3),
		"1.38.0": buildVersion(1, 38, 0),
	} {
		n := declared(Options{EnvoyVersion: ver})
		got := &corev3.Node{UserAgentName: n.GetUserAgentName(), UserAgentVersionType: n.GetUserAgentVersionType()}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("EnvoyVersion %q (-want +got):\n%s", ver, diff)
		}
		if n.GetId() != "gw-0" || n.GetMetadata().GetFields()["GATEWAY_NAME"].GetStringValue() != "gateway" {
			t.Errorf("EnvoyVersion %q: bootstrap node lost: %v", ver, n)
		}
	}
	if _, err := New(testBootstrap(t, "127.0.0.1:1", false), Options{EnvoyVersion: "1.37"}); err == nil ||
		!strings.Contains(err.Error(), "EnvoyVersion") {
		t.Errorf("EnvoyVersion 1.37: got %v, want an error naming the option", err)
	}
}

// An older data plane ignores a field newer than itself as Envoy does: the
// resource is accepted (no NACK), the field has no effect, and one warning
// per distinct description is logged and counted. At 1.38 and later, the
// same cluster reports the served endpoint.
func TestOlderEnvoyIgnoresSelectedHostKey(t *testing.T) {
	const cname = "outbound|54321||pool"
	const wantLog = "Unknown field: type envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost(root) with unknown field set {2}"
	for _, tc := range []struct {
		version     string
		wantServed  bool
		wantUnknown int64
	}{
		{"1.37.3", false, 1},
		{"1.38.0", true, 0},
		{"", true, 0},
	} {
		t.Run("envoy "+tc.version, func(t *testing.T) {
			logs := &syncLog{}
			dp := newTestDP(t, Options{EnvoyVersion: tc.version, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			b := backend(t, "b")
			bAddr := b.Listener.Addr().String()
			load(t, dp, overrideHostCluster(t, cname), cla(cname, bAddr),
				rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{Match: prefix("/"), Action: toCluster(cname)}}}))
			load(t, dp, overrideHostCluster(t, cname)) // again: the same description is not reported twice

			ac := dp.active.Load()
			req := &extproc.Request{Method: "GET", Path: "/", Authority: "x", Scheme: "http", Headers: http.Header{}}
			sel := routeSel{r: ac.routes["http.80"].selectVirtualHost("x").selectRoute(req)}
			md := map[string]*structpb.Struct{"envoy.lb": {Fields: map[string]*structpb.Value{"x-gateway-destination-endpoint": structpb.NewStringValue(bAddr)}}}
			resp, served, err := dp.router(context.Background(), ac, sel, req, md)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.Headers.Get("x-backend") != "b" || dp.Counters().OverrideHostFallbacks != 0 {
				t.Fatalf("the pick must be honoured at every version: backend %q, fallbacks %d", resp.Headers.Get("x-backend"), dp.Counters().OverrideHostFallbacks)
			}
			got := served["envoy.lb"].GetFields()["x-gateway-destination-endpoint-served"].GetStringValue()
			if tc.wantServed && got != bAddr || !tc.wantServed && served != nil {
				t.Errorf("served metadata %v, want served endpoint reported: %v", served, tc.wantServed)
			}
			if c := dp.Counters(); c.UnknownFields != tc.wantUnknown || c.NACKs != 0 {
				t.Errorf("UnknownFields %d NACKs %d, want %d and 0", c.UnknownFields, c.NACKs, tc.wantUnknown)
			}
			warned := logs.lines("Unknown field:")
			if int64(len(warned)) != tc.wantUnknown || tc.wantUnknown == 1 && (!strings.Contains(warned[0], wantLog) || !strings.Contains(warned[0], "level=WARN")) {
				t.Errorf("warnings %q, want %d of %q", warned, tc.wantUnknown, wantLog)
			}
		})
	}
}

// servedRecorder is an EPP: it picks pick for every request (as a header
// and as envoy.lb metadata), passes bodies through, and records the
// metadata_context of each response_headers message.
type servedRecorder struct {
	extprocsvc.UnimplementedExternalProcessorServer
	pick string

	mu       sync.Mutex
	contexts []*corev3.Metadata
}

func (r *servedRecorder) Process(s extprocsvc.ExternalProcessor_ProcessServer) error {
	for {
		m, err := s.Recv()
		if err != nil {
			return nil
		}
		out := &extprocsvc.ProcessingResponse{}
		switch v := m.GetRequest().(type) {
		case *extprocsvc.ProcessingRequest_RequestHeaders:
			lb, _ := structpb.NewStruct(map[string]any{"x-gateway-destination-endpoint": r.pick})
			out.Response = &extprocsvc.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocsvc.HeadersResponse{
				Response: &extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
					{Header: &corev3.HeaderValue{Key: "x-gateway-destination-endpoint", RawValue: []byte(r.pick)}}}}}}}
			out.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{"envoy.lb": structpb.NewStructValue(lb)}}
		case *extprocsvc.ProcessingRequest_ResponseHeaders:
			r.mu.Lock()
			r.contexts = append(r.contexts, m.GetMetadataContext())
			r.mu.Unlock()
			out.Response = &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{}}
		case *extprocsvc.ProcessingRequest_RequestBody:
			out.Response = &extprocsvc.ProcessingResponse_RequestBody{RequestBody: passBody(v.RequestBody)}
		case *extprocsvc.ProcessingRequest_ResponseBody:
			out.Response = &extprocsvc.ProcessingResponse_ResponseBody{ResponseBody: passBody(v.ResponseBody)}
		case *extprocsvc.ProcessingRequest_RequestTrailers:
			out.Response = &extprocsvc.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocsvc.TrailersResponse{}}
		case *extprocsvc.ProcessingRequest_ResponseTrailers:
			out.Response = &extprocsvc.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocsvc.TrailersResponse{}}
		}
		if err := s.Send(out); err != nil {
			return nil
		}
	}
}

func passBody(b *extprocsvc.HttpBody) *extprocsvc.BodyResponse {
	return &extprocsvc.BodyResponse{Response: &extprocsvc.CommonResponse{BodyMutation: &extprocsvc.BodyMutation{
		Mutation: &extprocsvc.BodyMutation_StreamedResponse{StreamedResponse: &extprocsvc.StreamedBodyResponse{
			Body: b.GetBody(), EndOfStream: b.GetEndOfStream()}}}}}
}

func (r *servedRecorder) served() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.contexts {
		out = append(out, c.GetFilterMetadata()["envoy.lb"].GetFields()["x-gateway-destination-endpoint-served"].GetStringValue())
	}
	return out
}

// The seed end to end against an EPP, with the data plane as Envoy 1.37
// and as the default version: pilot's configuration is accepted at both;
// the EPP's pick is honoured at both; the EPP is told the served endpoint
// only by the newer one; pilot reports the 1.37 proxy below its version
// floor in /debug/syncz.
func TestEndToEndOlderEnvoyNoServedEndpoint(t *testing.T) {
	for _, tc := range []struct {
		version    string
		wantServed string
		wantBelow  bool
	}{
		{"1.37.3", "", true},
		{"", "10.244.0.14:8000", false},
	} {
		t.Run("envoy "+tc.version, func(t *testing.T) {
			ctx := testCtx(t)
			servers := map[string]string{}
			for _, n := range []string{"10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000"} {
				servers[n] = backend(t, n).Listener.Addr().String()
			}
			epp := &servedRecorder{pick: "10.244.0.14:8000"}
			gs := grpc.NewServer()
			extprocsvc.RegisterExternalProcessorServer(gs, epp)
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
			_, srv := runXDSServer(t, lis)
			dp := runDP(t, testBootstrap(t, lis.Addr().String(), false), servers, Options{EnvoyVersion: tc.version})
			if err := dp.WaitFor(ctx, func(s Snapshot) bool {
				return s.Listeners["0.0.0.0_80"] != nil && len(s.Endpoints[seedShadowCluster]) == 3 && s.Clusters[seedEPPCluster] != nil
			}); err != nil {
				t.Fatalf("%v; last NACK %+v", err, dp.Snapshot().LastNACK)
			}

			resp := get(t, dp, 80, "GET", "llm.ssup2.com", "/v1/models", nil)
			if resp.StatusCode != 200 || bodyOf(resp) != "10.244.0.14:8000" {
				t.Fatalf("request: %d %q, want 200 from the EPP's pick 10.244.0.14:8000", resp.StatusCode, bodyOf(resp))
			}
			if diff := cmp.Diff([]string{tc.wantServed}, epp.served()); diff != "" {
				t.Errorf("served endpoint the EPP was told (-want +got):\n%s", diff)
			}
			if c := dp.Counters(); c.NACKs != 0 || c.OverrideHostFallbacks != 0 || c.ExtProcFailuresAllowed != 0 {
				t.Errorf("counters %+v: want no NACK, fallback or ext_proc failure", c)
			}
			if below := belowFloor(t, srv); below != tc.wantBelow {
				t.Errorf("pilot's syncz belowVersionFloor = %v, want %v", below, tc.wantBelow)
			}
		})
	}
}

// belowFloor reads the one stream's belowVersionFloor from srv's
// /debug/syncz.
func belowFloor(t *testing.T, srv *xds.Server) bool {
	t.Helper()
	h := httptest.NewServer(srv.Handler())
	defer h.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(h.URL + "/debug/syncz")
		if err != nil {
			t.Fatal(err)
		}
		var st []xds.ProxyStatus
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(st) == 1 && st[0].UserAgent == "envoy" {
			return st[0].BelowFloor
		}
		if time.Now().After(deadline) {
			t.Fatalf("syncz never showed the data plane: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
