// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/dataplane/dataplanetest"

	"github.com/infermesh/infermesh/pkg/test/dataplane"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBootstrap is dataplanetest.Bootstrap.
func testBootstrap(t *testing.T, addr string, delta bool) []byte {
	return dataplanetest.Bootstrap(t, addr, delta)
}

// newTestDP returns a DataPlane that is not running (no ADS), for feeding
// resources directly with load.
func newTestDP(t *testing.T, opts dataplane.Options) *dataplane.DataPlane {
	t.Helper()
	if opts.ListenerAddress == nil {
		opts.ListenerAddress = func(uint32) string { return "127.0.0.1:0" }
	}
	dp, err := dataplane.New(testBootstrap(t, "127.0.0.1:1", false), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dp.Close)
	return dp
}

// load validates resources as an xDS response to dp would (at its Envoy
// version) and applies them, as if each had arrived in its own accepted
// response.
func load(t *testing.T, dp *dataplane.DataPlane, msgs ...proto.Message) {
	t.Helper()
	if err := dp.Apply(msgs...); err != nil {
		t.Fatal(err)
	}
}

// backend is dataplanetest.Backend.
func backend(t *testing.T, name string) *httptest.Server { return dataplanetest.Backend(t, name) }

func backendHandler(name string) http.Handler { return dataplanetest.BackendHandler(name) }

// get is dataplanetest.Get.
func get(t *testing.T, dp *dataplane.DataPlane, port uint32, method, host, path string, hdr http.Header) *http.Response {
	return dataplanetest.Get(t, dp, port, method, host, path, hdr)
}

func bodyOf(r *http.Response) string { return dataplanetest.BodyOf(r) }

// testCtx is a context bounded for the test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// editAny is dataplanetest.EditAny.
func editAny[M proto.Message](t *testing.T, a *anypb.Any, msg M, edit func(M)) *anypb.Any {
	return dataplanetest.EditAny(t, a, msg, edit)
}

func seedGateway() model.Gateway { return seedmodel.Gateway() }

// runDP starts a data plane from boot, running until the test ends. It
// listens on loopback, and a dial to a name in servers goes to the
// loopback address it maps to (unless opts sets its own Dial).
func runDP(t *testing.T, boot []byte, servers map[string]string, opts dataplane.Options) *dataplane.DataPlane {
	t.Helper()
	if opts.ListenerAddress == nil {
		opts.ListenerAddress = func(uint32) string { return "127.0.0.1:0" }
	}
	if opts.Dial == nil {
		var d net.Dialer
		opts.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if a, ok := servers[addr]; ok {
				addr = a
			}
			return d.DialContext(ctx, network, addr)
		}
	}
	dp, err := dataplane.New(boot, opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- dp.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-runDone })
	return dp
}

// decodeMsg is the data plane's verdict on m, a resource of type typeURL,
// as a NACK would carry it (dataplane.Validate).
func decodeMsg(t *testing.T, typeURL string, m proto.Message) error {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	if a.GetTypeUrl() != typeURL {
		t.Fatalf("%s is not a %s", a.GetTypeUrl(), typeURL)
	}
	return dataplane.Validate(a)
}
