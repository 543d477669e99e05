// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/dataplane"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
)

// corsPoolDP serves, through the data plane, pilot's translation of an
// HTTPRoute (corsHost, PathPrefix /) with a CORS filter (corsOrigin) to an
// InferencePool with failure mode mode, whose EPP is a brokenEPP. It
// returns the data plane, the EPP, and the number of requests the model
// server saw.
func corsPoolDP(t *testing.T, mode inferencev1.EndpointPickerFailureMode) (*dataplane.DataPlane, *brokenEPP, func() int) {
	t.Helper()
	pool := seedmodel.PoolBackend("llm", "pool", "pool-ip", mode)
	gw := seedmodel.GatewayWith("gw", "gw", "llm", "chat", corsHost, pool)
	rule := gw.Listeners[0].Routes[0].Rules[0].HTTP
	rule.Filters = append(rule.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterCORS, CORS: &gwv1.HTTPCORSFilter{
		AllowOrigins:  []gwv1.CORSOrigin{corsOrigin},
		AllowMethods:  []gwv1.HTTPMethodWithWildcard{"GET", "POST"},
		AllowHeaders:  []gwv1.HTTPHeaderName{"content-type"},
		ExposeHeaders: []gwv1.HTTPHeaderName{"x-request-id"},
		MaxAge:        600,
	}})
	res, err := core.BuildGateway(&gw, core.Inputs{Endpoints: map[string][]core.Endpoint{
		corsShadow: {{Address: "10.244.0.13", Port: 8000}},
		corsEPP:    {{Address: "10.244.0.16", Port: 9002}},
	}}, core.Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}

	var seen sync.Mutex
	served := 0
	ms := httptest.NewServer(countingHandler(&seen, &served, backendHandler("model")))
	t.Cleanup(ms.Close)
	epp := &brokenEPP{}
	gs := grpc.NewServer()
	extprocsvc.RegisterExternalProcessorServer(gs, epp)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	addrs := map[string]string{"10.244.0.13:8000": ms.Listener.Addr().String(), "10.244.0.16:9002": lis.Addr().String()}
	var d net.Dialer
	dp := newTestDP(t, dataplane.Options{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := addrs[addr]; ok {
			addr = a
		}
		return d.DialContext(ctx, network, addr)
	}})
	load(t, dp, resourcesOf(res)...)
	return dp, epp, func() int { seen.Lock(); defer seen.Unlock(); return served }
}

// A CORS preflight on a pool's route is answered by the CORS filter and no
// EPP stream is opened, on a FailOpen and on a FailClose pool whose EPP
// errors: Envoy would send the CORS filter's reply through ext_proc's
// encodeHeaders (response_headers first), and a FailClose EPP error would
// make the preflight a 500. A preflight from an origin that is not allowed
// gets 200 without access-control-allow-origin, and reaches neither the EPP
// nor a model server.
func TestCORSPreflightOnPoolSkipsTheEPP(t *testing.T) {
	for _, mode := range []inferencev1.EndpointPickerFailureMode{inferencev1.EndpointPickerFailOpen, inferencev1.EndpointPickerFailClose} {
		t.Run(string(mode), func(t *testing.T) {
			dp, epp, served := corsPoolDP(t, mode)
			resp := get(t, dp, 80, http.MethodOptions, corsHost, "/v1/chat/completions", preflight(corsOrigin))
			if resp.StatusCode != http.StatusOK {
				t.Errorf("preflight: status %d, want 200", resp.StatusCode)
			}
			want := map[string]string{
				"Access-Control-Allow-Origin":  corsOrigin,
				"Access-Control-Allow-Methods": "GET,POST",
				"Access-Control-Allow-Headers": "content-type",
				"Access-Control-Max-Age":       "600",
			}
			for k, v := range want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("preflight: %s = %q, want %q", k, got, v)
				}
			}
			resp = get(t, dp, 80, http.MethodOptions, corsHost, "/v1/chat/completions", preflight("https://evil.example.net"))
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("preflight from another origin: status %d, allow-origin %q; want 200 without it", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
			}
			if s := epp.streams(); len(s) != 0 {
				t.Errorf("the EPP got %d streams (first messages %v), want none", len(s), s)
			}
			if n := served(); n != 0 {
				t.Errorf("a model server saw %d preflights, want none", n)
			}
		})
	}
}

// The HTTP filter order stays CORS, then ext_proc (architecture/xds.md,
// "HTTP filter order"). The CORS filter then decodes a CORS request before
// ext_proc does, so a reply ext_proc makes while the request is decoded (a
// FailClose EPP error here; an EPP ImmediateResponse likewise) passes the
// CORS filter's encodeHeaders and carries access-control-allow-origin: a
// browser application can read the 500 instead of seeing an opaque CORS
// failure. With Istio's order (ext_proc first) the CORS filter never
// decodes the request and the same 500 has no CORS headers; the test shows
// that by swapping the two filters.
func TestFilterOrderLetsBrowsersReadEPPErrors(t *testing.T) {
	dp, epp, served := corsPoolDP(t, inferencev1.EndpointPickerFailClose)
	hdr := http.Header{"Origin": {corsOrigin}, "Content-Type": {"application/json"}}
	resp := get(t, dp, 80, http.MethodGet, corsHost, "/v1/models", hdr)
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Access-Control-Allow-Origin") != corsOrigin ||
		resp.Header.Get("Access-Control-Expose-Headers") != "x-request-id" {
		t.Errorf("CORS then ext_proc: status %d, allow-origin %q, expose %q; want 500 with the CORS headers",
			resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Expose-Headers"))
	}
	if s := epp.streams(); len(s) != 1 || served() != 0 {
		t.Fatalf("EPP streams %v, model server requests %d; want one stream and none", s, served())
	}

	l := dp.Snapshot().Listeners["0.0.0.0_80"]
	load(t, dp, swapFirstHTTPFilters(t, l))
	resp = get(t, dp, 80, http.MethodGet, corsHost, "/v1/models", hdr)
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("ext_proc then CORS: status %d, allow-origin %q; want 500 without it", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

const (
	corsHost   = "llm.example.com"
	corsOrigin = "https://app.example.com"
	corsShadow = "outbound|54321||pool-ip.llm.svc.cluster.local"
	corsEPP    = "outbound|9002||pool-epp.llm.svc.cluster.local"
)

func countingHandler(mu *sync.Mutex, n *int, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*n++
		mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// brokenEPP is an EPP whose every stream fails with Unavailable after its
// first message; it records what each stream's first message was.
type brokenEPP struct {
	extprocsvc.UnimplementedExternalProcessorServer
	mu    sync.Mutex
	first []string
}

func (p *brokenEPP) Process(s extprocsvc.ExternalProcessor_ProcessServer) error {
	m, err := s.Recv()
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.first = append(p.first, fmt.Sprintf("%T", m.GetRequest()))
	p.mu.Unlock()
	return status.Error(codes.Unavailable, "epp is broken")
}

func (p *brokenEPP) streams() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.first...)
}

func preflight(origin string) http.Header {
	return http.Header{"Origin": {origin}, "Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"content-type"}}
}

// swapFirstHTTPFilters returns l with its HCM's first two HTTP filters
// swapped.
func swapFirstHTTPFilters(t *testing.T, l *listenerv3.Listener) *listenerv3.Listener {
	t.Helper()
	out := proto.Clone(l).(*listenerv3.Listener)
	f := out.GetFilterChains()[0].GetFilters()[0]
	var hcm hcmv3.HttpConnectionManager
	if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	hf := hcm.HttpFilters
	if len(hf) < 3 {
		t.Fatalf("http filters %v", hf)
	}
	hf[0], hf[1] = hf[1], hf[0]
	a, err := anypb.New(&hcm)
	if err != nil {
		t.Fatal(err)
	}
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
	return out
}
