// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

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
