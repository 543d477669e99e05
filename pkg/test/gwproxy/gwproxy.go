// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gwproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	"syscall"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/dataplane"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

// Proxy is the Gateway's proxy: the test data plane or real Envoy.
type Proxy interface {
	// Addr is the host:port where the Gateway's listener accepts.
	Addr() string
	// WaitEndpoints blocks until cluster's endpoints are exactly want
	// (sorted "ip:port"), or ctx ends.
	WaitEndpoints(ctx context.Context, cluster string, want []string) error
	// Endpoints are cluster's endpoints now, sorted (for failure messages).
	Endpoints(cluster string) []string
}

// DataPlane is the test data plane (pkg/test/dataplane) in process.
type DataPlane struct {
	DP   *dataplane.DataPlane
	port uint32
}

// StartDataPlane boots the test data plane from boot unmodified, every
// xDS listener on a free loopback port, and waits (at most wait) until the
// listener of the Gateway's port is up. logger may be nil. It stops when the
// test ends.
func StartDataPlane(t testing.TB, boot []byte, port uint32, logger *slog.Logger, wait time.Duration) *DataPlane {
	t.Helper()
	dp, err := dataplane.New(boot, dataplane.Options{
		ListenerAddress: func(uint32) string { return "127.0.0.1:0" },
		Logger:          logger,
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
	wctx, wcancel := context.WithTimeout(context.Background(), wait)
	defer wcancel()
	if err := dp.WaitFor(wctx, func(dataplane.Snapshot) bool { return dp.Addr(port) != nil }); err != nil {
		s := dp.Snapshot()
		t.Fatalf("no listener on port %d: %v (connected %v, last NACK %+v)", port, err, s.Connected, s.LastNACK)
	}
	return &DataPlane{DP: dp, port: port}
}

// Addr is the Gateway listener's address; "" when the data plane has no
// listener on the port (requests to it then fail, the caller does not panic).
func (p *DataPlane) Addr() string {
	a := p.DP.Addr(p.port)
	if a == nil {
		return ""
	}
	return a.String()
}

// WaitEndpoints implements Proxy.
func (p *DataPlane) WaitEndpoints(ctx context.Context, cluster string, want []string) error {
	return p.DP.WaitFor(ctx, func(s dataplane.Snapshot) bool {
		return slices.Equal(slices.Sorted(slices.Values(s.Endpoints[cluster])), want)
	})
}

// Endpoints implements Proxy.
func (p *DataPlane) Endpoints(cluster string) []string {
	return slices.Sorted(slices.Values(p.DP.Snapshot().Endpoints[cluster]))
}

// Envoy is a real Envoy binary.
type Envoy struct {
	admin string // admin host:port
	addr  string
}

// StartEnvoy runs bin with the same bootstrap. Only what cannot be shared on
// one host is changed, and only in Envoy's copy: the admin port and any
// static listener's port become free loopback ports. The Gateway's listener
// comes from LDS, on the Gateway's port, reached on 127.0.0.1 (so that port
// must be free). It waits (at most wait) for that listener.
func StartEnvoy(t testing.TB, bin string, boot []byte, port uint32, wait time.Duration) *Envoy {
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
	cfg := filepath.Join(t.TempDir(), "envoy.json")
	if err := os.WriteFile(cfg, out, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var logMu sync.Mutex
	// No hot restart: no shared memory that two Envoys on one host could clash on.
	cmd := exec.Command(bin, "-c", cfg, "--log-level", "warn", "--disable-hot-restart")
	w := lockedWriter{mu: &logMu, w: &logs}
	cmd.Stdout, cmd.Stderr = w, w
	// Its own process group (a Ctrl-C at the terminal is the caller's to
	// handle), killed by the kernel if the caller dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
	p := &Envoy{admin: net.JoinHostPort("127.0.0.1", strconv.Itoa(adminPort)),
		addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))}
	poll.Until(t, wait, fmt.Sprintf("Envoy's listener on port %d", port), func() bool {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
	return p
}

// Addr implements Proxy.
func (p *Envoy) Addr() string { return p.addr }

// Admin is Envoy's admin address, host:port on 127.0.0.1.
func (p *Envoy) Admin() string { return p.admin }

// WaitEndpoints implements Proxy.
func (p *Envoy) WaitEndpoints(ctx context.Context, cluster string, want []string) error {
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
func (p *Envoy) Endpoints(cluster string) []string {
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

func freePort(t testing.TB) int {
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
