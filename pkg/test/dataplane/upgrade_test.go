// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// echoUpgradeBackend accepts any upgrade with a 101 that names it, then
// echoes every byte back.
func echoUpgradeBackend(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + r.Header.Get("Upgrade") +
			"\r\nX-Seen-Connection: " + r.Header.Get("Connection") + "\r\n\r\n")
		_ = brw.Flush()
		_, _ = io.Copy(conn, brw)
	}))
	t.Cleanup(s.Close)
	return s
}

// upgradeRequest sends an HTTP/1.1 upgrade request for protocol on a new
// connection to the listener on 80 and returns the response and the
// connection's reader and conn (closed at cleanup).
func upgradeRequest(t *testing.T, dp *DataPlane, protocol string) (*http.Response, *bufio.Reader, net.Conn) {
	t.Helper()
	conn, err := net.Dial("tcp", dp.Addr(80).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: "+protocol+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp, br, conn
}

// WebSocket through the connection manager's upgrade_configs (Envoy's
// HttpConnectionManager.UpgradeConfig in the API reference; the "HTTP
// upgrades" architecture overview page, intro/arch_overview/http/upgrades;
// ConnectionManagerUtility::mutateRequestHeaders and mutateResponseHeaders
// keep Connection and Upgrade on an upgrade, source/common/http/
// conn_manager_utility.cc): the upgrade request reaches the upstream with
// Connection and Upgrade, the upstream's 101 reaches the client with them,
// and bytes then flow both ways. The type is matched case-insensitively
// (HttpConnectionManagerConfig::createUpgradeFilterChain,
// findUpgradeCaseInsensitive, source/extensions/filters/network/
// http_connection_manager/config.cc). A type upgrade_configs does not list, or lists with
// enabled false, is refused with 403 and the connection closed
// (ConnectionManagerImpl::ActiveStream::decodeHeaders, details
// upgrade_failed). A non-websocket type, or two configs of one type, is a
// NACK (not implemented); so is ext_proc on an upgraded stream refused
// with a 500 (Envoy would hand the tunnel's bytes to the processor as
// body; not implemented, stricter).
func TestWebSocketUpgrade(t *testing.T) {
	be := echoUpgradeBackend(t)
	routes := rc(&routev3.VirtualHost{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{Match: prefix("/"), Action: toCluster("up")}}})
	withUpgrades := func(ucs ...*hcmv3.HttpConnectionManager_UpgradeConfig) *DataPlane {
		l := seedListener(t)
		l.FilterChains[0].Filters[0] = setHCM(t, l.FilterChains[0].Filters[0], func(h *hcmv3.HttpConnectionManager) { h.UpgradeConfigs = ucs })
		dp := newTestDP(t, Options{})
		load(t, dp, edsCluster(t, "up", false), cla("up", be.Listener.Addr().String()), routes, l)
		return dp
	}

	dp := withUpgrades(&hcmv3.HttpConnectionManager_UpgradeConfig{UpgradeType: "websocket"})
	resp, br, conn := upgradeRequest(t, dp, "WebSocket") // types match case-insensitively
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "WebSocket" ||
		resp.Header.Get("Connection") != "Upgrade" || resp.Header.Get("X-Seen-Connection") != "Upgrade" {
		t.Fatalf("upgrade: %d %v, want 101 with Upgrade and Connection both ways", resp.StatusCode, resp.Header)
	}
	for _, msg := range []string{"hello", "\x01\x02\x03"} {
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
			t.Fatalf("echo through the tunnel: %q, %v; want %q", got, err, msg)
		}
	}
	if resp, _, _ := upgradeRequest(t, dp, "h2c"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an upgrade type not configured: %d, want 403", resp.StatusCode)
	}
	// The data plane's shutdown ends the tunnel (the HTTP server no longer
	// tracks a connection it handed over), as Envoy's drain ends streams.
	dp.shutdown()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "after"); err == nil {
		if n, err := br.Read(make([]byte, 8)); err == nil {
			t.Errorf("the tunnel still carried %d bytes after shutdown", n)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Error("the tunnel is still open after shutdown")
		}
	}

	// ext_proc on the upgrade's route: refused, never tunnelled. The
	// processor's cluster does not exist and failure_mode_allow lets other
	// requests through (the backend's 426, one failure allowed), so only
	// the refusal makes the upgrade a 500.
	override, err := anypb.New(&extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{
		ProcessingMode:   &extprocv3.ProcessingMode{RequestHeaderMode: extprocv3.ProcessingMode_SEND, ResponseHeaderMode: extprocv3.ProcessingMode_SKIP},
		GrpcService:      &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "epp"}}},
		FailureModeAllow: wrapperspb.Bool(true),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	dp = withUpgrades(&hcmv3.HttpConnectionManager_UpgradeConfig{UpgradeType: "websocket"})
	load(t, dp, rc(&routev3.VirtualHost{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{Match: prefix("/"), Action: toCluster("up"),
		TypedPerFilterConfig: map[string]*anypb.Any{filterExtProc: override}}}}))
	if resp := get(t, dp, 80, "GET", "x", "/ws", nil); resp.StatusCode != http.StatusUpgradeRequired || dp.Counters().ExtProcFailuresAllowed != 1 {
		t.Errorf("GET through the failing ext_proc: %d after %d failures allowed, want the backend's 426 after one (failure_mode_allow)",
			resp.StatusCode, dp.Counters().ExtProcFailuresAllowed)
	}
	if resp, _, _ := upgradeRequest(t, dp, "websocket"); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("websocket through ext_proc: %d, want 500 (not implemented)", resp.StatusCode)
	}

	dp = withUpgrades(&hcmv3.HttpConnectionManager_UpgradeConfig{UpgradeType: "websocket", Enabled: wrapperspb.Bool(false)})
	if resp, _, _ := upgradeRequest(t, dp, "websocket"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("websocket disabled: %d, want 403", resp.StatusCode)
	}

	for _, ucs := range [][]*hcmv3.HttpConnectionManager_UpgradeConfig{
		{{UpgradeType: "CONNECT"}},
		{{UpgradeType: "websocket"}, {UpgradeType: "WebSocket"}},
	} {
		l := seedListener(t)
		l.FilterChains[0].Filters[0] = setHCM(t, l.FilterChains[0].Filters[0], func(h *hcmv3.HttpConnectionManager) { h.UpgradeConfigs = ucs })
		if err := decodeMsg(t, resourcev3.ListenerType, l); err == nil || !strings.Contains(err.Error(), "upgrade") {
			t.Errorf("upgrade_configs %v: %v, want a NACK naming the upgrade", ucs, err)
		}
	}
}
