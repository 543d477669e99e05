// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/dataplane/dataplanetest"

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
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBootstrap is dataplanetest.Bootstrap.
func testBootstrap(t *testing.T, addr string, delta bool) []byte {
	return dataplanetest.Bootstrap(t, addr, delta)
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

// backend is dataplanetest.Backend.
func backend(t *testing.T, name string) *httptest.Server { return dataplanetest.Backend(t, name) }

func backendHandler(name string) http.Handler { return dataplanetest.BackendHandler(name) }

// get is dataplanetest.Get.
func get(t *testing.T, dp *DataPlane, port uint32, method, host, path string, hdr http.Header) *http.Response {
	return dataplanetest.Get(t, dp, port, method, host, path, hdr)
}

func bodyOf(r *http.Response) string { return dataplanetest.BodyOf(r) }

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

// editAny is dataplanetest.EditAny.
func editAny[M proto.Message](t *testing.T, a *anypb.Any, msg M, edit func(M)) *anypb.Any {
	return dataplanetest.EditAny(t, a, msg, edit)
}

func seedGateway() model.Gateway { return seedmodel.Gateway() }
