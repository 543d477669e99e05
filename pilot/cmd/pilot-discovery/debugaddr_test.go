// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/logbuf"
)

// debugPaths are the debug endpoints, each of which shows a Gateway's
// configuration, the proxies, the feature flags or the process.
var debugPaths = []string{
	"/debug/config_dump?gateway=" + seedGateway, "/debug/syncz", "/debug/krtz", "/debug/features",
	"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=2",
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestDebugEndpointsOffTheNetworkPort: the debug endpoints are kept off
// the network. --http-address,
// the port the install manifests put on the network, answers /metrics and
// /ready and nothing under /debug/; --debug-address serves the debug
// endpoints.
func TestDebugEndpointsOffTheNetworkPort(t *testing.T) {
	d := fakeDeps(t, inference...)
	a := startDiscovery(t, d, "discovery", "-f", seedDir, "--plaintext", "--ads-address", "127.0.0.1:0",
		"--http-address", "127.0.0.1:0", "--debug-address", "127.0.0.1:0")
	network := "http://" + a.HTTP.String()
	waitReady(t, network+"/ready")
	for _, p := range debugPaths {
		if code, body := httpGet(t, network+p); code != http.StatusNotFound {
			t.Errorf("GET %s on --http-address: %d, want 404; body starts %q", p, code, head(body))
		}
	}
	if code, body := httpGet(t, network+"/metrics"); code != http.StatusOK || !strings.Contains(body, "infermesh_xds_pushes_total") {
		t.Errorf("GET /metrics on --http-address: %d %q", code, head(body))
	}
	if a.Debug == nil {
		t.Fatal("no debug listener")
	}
	debug := "http://" + a.Debug.String()
	for _, p := range debugPaths {
		if code, body := httpGet(t, debug+p); code != http.StatusOK {
			t.Errorf("GET %s on --debug-address: %d, want 200; body starts %q", p, code, head(body))
		}
	}
	if _, body := httpGet(t, debug+"/debug/config_dump?gateway="+seedGateway); !strings.Contains(body, seedShadowCluster) {
		t.Errorf("config_dump on --debug-address lacks %s", seedShadowCluster)
	}

	// A DNS-rebinding page reaches the debug port with its own name as
	// Host: refused on every path, the plain metrics included. The
	// monitoring port answers whatever the Host.
	_, port, _ := net.SplitHostPort(a.Debug.String())
	for _, host := range []string{"rebind.example.com:" + port, "rebind.example.com", "localhost.example.com", "10.0.0.1:" + port} {
		for _, p := range append(slices.Clone(debugPaths), "/metrics") {
			code, body := getWithHost(t, debug+p, host)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "DNS rebinding") {
				t.Errorf("GET %s with Host %s on --debug-address: %d %q, want 421 saying why", p, host, code, head(body))
			}
		}
	}
	for _, host := range []string{"localhost:" + port, "LocalHost", "127.0.0.1", "127.1.2.3:8080"} {
		if code, _ := getWithHost(t, debug+"/debug/syncz", host); code != http.StatusOK {
			t.Errorf("GET /debug/syncz with Host %s: %d, want 200", host, code)
		}
	}
	if code, body := getWithHost(t, network+"/metrics", "prometheus.example.com"); code != http.StatusOK || !strings.Contains(body, "infermesh_xds_pushes_total") {
		t.Errorf("GET /metrics on --http-address with another Host: %d, want 200", code)
	}
}

// getWithHost is GET url with the Host header host.
func getWithHost(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", url, host, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func head(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}

// TestDebugAddressDefaultIsLoopback: without --debug-address the debug
// endpoints listen on loopback only.
func TestDebugAddressDefaultIsLoopback(t *testing.T) {
	f := newDiscoveryCommand(&app{deps: fakeDeps(t)}).Flags().Lookup("debug-address")
	if f == nil {
		t.Fatal("no --debug-address flag")
	}
	host, _, err := net.SplitHostPort(f.DefValue)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Errorf("--debug-address defaults to %q, want a loopback IP", f.DefValue)
	}
}

// TestDebugOnNetworkWarns: binding the debug endpoints beyond loopback is
// the operator's choice, and the log says what it exposes.
func TestDebugOnNetworkWarns(t *testing.T) {
	logs := &logbuf.Buffer{}
	d := fakeDeps(t, inference...)
	d.stderr = logs
	served := make(chan struct{}, 1)
	d.serving = func(_, _, _ net.Addr) { served <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		cmd := newRootCommandWith(d)
		cmd.SetArgs([]string{"discovery", "-f", seedDir, "--plaintext", "--ads-address", "127.0.0.1:0",
			"--http-address", "127.0.0.1:0", "--debug-address", ":0"})
		cmd.SetOut(&bytes.Buffer{})
		done <- cmd.ExecuteContext(ctx)
	}()
	select {
	case <-served:
	case err := <-done:
		t.Fatalf("discovery ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("discovery did not start serving")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("discovery: %v", err)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"the debug endpoints are served beyond loopback`) {
		t.Errorf("no warning about the debug endpoints on the network:\n%s", logs.String())
	}
	// File mode has no proxy authorization: said at start.
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"ADS serves without proxy authorization (file mode has no proxy authorization): any client that reaches the ADS address and names a Gateway reads its configuration and the private keys of its HTTPS listeners`) {
		t.Errorf("no warning that ADS serves without authorization:\n%s", logs.String())
	}
}
