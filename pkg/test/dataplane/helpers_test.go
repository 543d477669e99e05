// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"

	"github.com/infermesh/infermesh/pkg/bootstrap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBootstrap is pkg/bootstrap's JSON for the seed Gateway, plaintext ADS
// at addr; delta switches ads_config.api_type to DELTA_GRPC.
func testBootstrap(t *testing.T, addr string, delta bool) []byte {
	t.Helper()
	b, err := bootstrap.JSON(bootstrap.Config{
		NodeID: "gw-0", Cluster: "gateway", GatewayNamespace: "gateway-namespace", GatewayName: "gateway",
		XDSAddress: addr, Plaintext: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !delta {
		return b
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["dynamic_resources"].(map[string]any)["ads_config"].(map[string]any)["api_type"] = "DELTA_GRPC"
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newTestDP returns a DataPlane that is not running (no ADS), for feeding
// resources directly with load.
func newTestDP(t *testing.T, opts Options) *DataPlane {
	t.Helper()
	if opts.ListenerAddress == nil {
		opts.ListenerAddress = func(uint32) string { return "127.0.0.1:0" }
	}
	dp, err := New(testBootstrap(t, "127.0.0.1:1", false), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dp.shutdown)
	return dp
}

// load validates resources as an xDS response to dp would (at its Envoy
// version) and applies them, as if each had arrived in its own accepted
// response.
func load(t *testing.T, dp *DataPlane, msgs ...proto.Message) {
	t.Helper()
	if err := dp.Apply(msgs...); err != nil {
		t.Fatal(err)
	}
}

// backend is an HTTP/1.1 server on 127.0.0.1 answering with its name in
// the body and header x-backend, and echoing the request in headers
// x-seen-path, x-seen-host, x-seen-proto, x-seen-xfp (x-forwarded-proto).
func backend(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(backendHandler(name))
	t.Cleanup(s.Close)
	return s
}

func backendHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-backend", name)
		w.Header().Set("x-seen-path", r.URL.RequestURI())
		w.Header().Set("x-seen-host", r.Host)
		w.Header().Set("x-seen-proto", r.Proto)
		w.Header().Set("x-seen-xfp", r.Header.Get("X-Forwarded-Proto"))
		for k, v := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-test-") {
				w.Header()["Seen-"+k] = v
			}
		}
		_, _ = io.WriteString(w, name)
	})
}

// get sends a request to the data plane's listener on port with host.
func get(t *testing.T, dp *DataPlane, port uint32, method, host, path string, hdr http.Header) *http.Response {
	t.Helper()
	a := dp.Addr(port)
	if a == nil {
		t.Fatalf("no listener on port %d", port)
	}
	req, err := http.NewRequest(method, "http://"+a.String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header[k] = v
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	resp.Header.Set("x-test-body", string(b))
	return resp
}

func bodyOf(r *http.Response) string { return r.Header.Get("x-test-body") }

// testCtx is a context bounded for the test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fromJSON parses protojson into m or fails.
func fromJSON(t *testing.T, s string, m proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal([]byte(s), m); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
}

// seedListener is the listener core builds for the seed.
func seedListener(t *testing.T) *listenerv3.Listener {
	t.Helper()
	gw := seedmodel.Gateway()
	res, err := core.BuildGateway(&gw, core.Inputs{}, core.Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.Listeners[0]
}

// withHCMField returns f with generate_request_id set in its HCM.
func withHCMField(t *testing.T, f *listenerv3.Filter) *listenerv3.Filter {
	t.Helper()
	return setHCM(t, f, func(h *hcmv3.HttpConnectionManager) { h.GenerateRequestId = wrapperspb.Bool(false) })
}

// setHCM returns f with its HttpConnectionManager changed by edit.
func setHCM(t *testing.T, f *listenerv3.Filter, edit func(*hcmv3.HttpConnectionManager)) *listenerv3.Filter {
	t.Helper()
	a := editAny(t, f.GetTypedConfig(), &hcmv3.HttpConnectionManager{}, edit)
	return &listenerv3.Filter{Name: f.GetName(), ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}}
}

// editAny unpacks a into msg, changes it with edit and packs it anew; a is
// not modified.
func editAny[M proto.Message](t *testing.T, a *anypb.Any, msg M, edit func(M)) *anypb.Any {
	t.Helper()
	if err := a.UnmarshalTo(msg); err != nil {
		t.Fatal(err)
	}
	edit(msg)
	out, err := anypb.New(msg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func seedGateway() model.Gateway { return seedmodel.Gateway() }
