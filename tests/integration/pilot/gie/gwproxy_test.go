// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/dataplane"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

// gatewayProxy is the Gateway's proxy: the test data plane, or real Envoy
// when $ENVOY_BINARY is set. Both boot from the same bootstrap ConfigMap.
type gatewayProxy interface {
	// Addr is the host:port where the Gateway's port-80 listener accepts.
	Addr() string
	// WaitEndpoints blocks until cluster's endpoints are exactly want
	// (sorted "ip:port"), or ctx ends.
	WaitEndpoints(ctx context.Context, cluster string, want []string) error
	// Endpoints are cluster's endpoints now, sorted (for failure messages).
	Endpoints(cluster string) []string
}

// dataPlaneProxy runs pkg/test/dataplane.
type dataPlaneProxy struct {
	dp *dataplane.DataPlane
}

// startDataPlane boots the test data plane from boot unmodified, the
// Gateway's port 80 mapped to a free loopback port, and waits until that
// listener is up. It stops when the test ends.
func startDataPlane(t *testing.T, boot []byte) *dataPlaneProxy {
	t.Helper()
	dp, err := dataplane.New(boot, dataplane.Options{
		// Every xDS listener (the Gateway's port 80) on a free loopback port.
		ListenerAddress: func(uint32) string { return "127.0.0.1:0" },
		Logger:          debugLogger(),
	})
	if err != nil {
		t.Fatalf("data plane from the bootstrap ConfigMap: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dp.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("data plane: %v", err)
		}
	})
	wctx, wcancel := context.WithTimeout(t.Context(), waitConfig)
	defer wcancel()
	if err := dp.WaitFor(wctx, func(dataplane.Snapshot) bool { return dp.Addr(gwPort) != nil }); err != nil {
		s := dp.Snapshot()
		t.Fatalf("no listener on port %d: %v (connected %v, last NACK %+v)", gwPort, err, s.Connected, s.LastNACK)
	}
	return &dataPlaneProxy{dp: dp}
}

// Addr is the Gateway listener's address; "" when the data plane has no
// listener on the port (requests to it then fail, the test does not panic).
func (p *dataPlaneProxy) Addr() string {
	a := p.dp.Addr(gwPort)
	if a == nil {
		return ""
	}
	return a.String()
}

func (p *dataPlaneProxy) WaitEndpoints(ctx context.Context, cluster string, want []string) error {
	return p.dp.WaitFor(ctx, func(s dataplane.Snapshot) bool {
		return slices.Equal(slices.Sorted(slices.Values(s.Endpoints[cluster])), want)
	})
}

func (p *dataPlaneProxy) Endpoints(cluster string) []string {
	return slices.Sorted(slices.Values(p.dp.Snapshot().Endpoints[cluster]))
}

// envoyProxy runs a real Envoy binary.
type envoyProxy struct {
	admin string // admin host:port
	addr  string
}

// startEnvoy runs bin with the same bootstrap. Only what cannot be shared on
// one host is changed, and only in Envoy's copy: the admin port and any
// static listener's port become free loopback ports. The Gateway's listener
// comes from LDS, on the Gateway's port; the tests reach it on 127.0.0.1.
func startEnvoy(t *testing.T, bin string, boot []byte) *envoyProxy {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(boot, &b); err != nil {
		t.Fatal(err)
	}
	adminPort := freePort(t)
	b["admin"] = map[string]any{"address": map[string]any{"socket_address": map[string]any{
		"address": "127.0.0.1", "port_value": adminPort,
	}}}
	if sr, ok := b["static_resources"].(map[string]any); ok {
		if ls, ok := sr["listeners"].([]any); ok {
			for _, l := range ls {
				if sa, ok := dig(l, "address", "socket_address"); ok {
					sa["address"], sa["port_value"] = "127.0.0.1", freePort(t)
				}
			}
		}
	}
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "envoy.json")
	if err := os.WriteFile(cfg, out, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var logMu sync.Mutex
	// No hot restart: no shared memory that two Envoys on one host could clash on.
	cmd := exec.Command(bin, "-c", cfg, "--log-level", "warn", "--disable-hot-restart")
	w := lockedWriter{mu: &logMu, w: &logs}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			logMu.Lock()
			t.Logf("envoy log:\n%s", logs.String())
			logMu.Unlock()
		}
	})
	p := &envoyProxy{admin: net.JoinHostPort("127.0.0.1", strconv.Itoa(adminPort)),
		addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(gwPort))}
	poll.Until(t, waitConfig, "Envoy's listener on port 80", func() bool {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
	return p
}

func (p *envoyProxy) Addr() string { return p.addr }

func (p *envoyProxy) WaitEndpoints(ctx context.Context, cluster string, want []string) error {
	for interval := time.Millisecond; ; interval = min(2*interval, 50*time.Millisecond) {
		if slices.Equal(p.Endpoints(cluster), want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// Endpoints reads the admin /clusters page: lines
// "<cluster>::<ip:port>::health_flags::<flags>"; healthy hosts count.
func (p *envoyProxy) Endpoints(cluster string) []string {
	resp, err := http.Get("http://" + p.admin + "/clusters")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "::")
		if len(f) == 4 && f[0] == cluster && f[2] == "health_flags" && f[3] == "healthy" {
			out = append(out, f[1])
		}
	}
	slices.Sort(out)
	return out
}

func dig(v any, keys ...string) (map[string]any, bool) {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		v = m[k]
	}
	m, ok := v.(map[string]any)
	return m, ok
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// debugLogger logs the data plane's events to stderr when GIE_DEBUG is
// set; otherwise nil (discarded).
func debugLogger() *slog.Logger {
	if os.Getenv("GIE_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// dataPlane returns the test data plane, or nil under real Envoy: checks of
// the data plane's own counters run only on it.
func (h *harness) dataPlane() *dataplane.DataPlane {
	if p, ok := h.gw.(*dataPlaneProxy); ok {
		return p.dp
	}
	return nil
}
