// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/logbuf"
)

// fakeDeps has no environment, a home without a kubeconfig, and a client
// factory that fails the test if called.
func fakeDeps(t *testing.T, env ...string) deps {
	return deps{
		lookupEnv: envOf(env...),
		home:      t.TempDir(),
		newClient: func(clusterSource, ...kube.Option) (*kube.Client, error) {
			t.Error("newClient called")
			return nil, errors.New("not in this test")
		},
		stderr: io.Discard,
	}
}

func TestDiscoveryFlagErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no TLS and no --plaintext", nil,
			[]string{"ADS needs TLS", "--tls-cert-file and --tls-key-file", "--plaintext", "unencrypted"}},
		{"cert without key", []string{"--tls-cert-file", "c.pem"},
			[]string{"--tls-cert-file and --tls-key-file must be given together"}},
		{"plaintext and TLS", []string{"--plaintext", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"},
			[]string{"--plaintext conflicts with --tls-cert-file"}},
		{"log level", []string{"--plaintext", "--log-level", "verbose"},
			[]string{`--log-level "verbose": want one of debug, info, warn, error`}},
		{"max delay below debounce", []string{"--plaintext", "--push-debounce", "2s", "--push-max-delay", "1s"},
			[]string{"--push-max-delay 1s: must not be less than --push-debounce 2s"}},
		{"zero debounce", []string{"--plaintext", "--push-debounce", "0s"},
			[]string{"--push-debounce 0s: must be positive"}},
		{"xds-auth value", []string{"--plaintext", "--xds-auth", "mtls"},
			[]string{`--xds-auth "mtls": want none or serviceaccount`}},
		{"token auth in plaintext", []string{"--plaintext", "--xds-auth", "serviceaccount"},
			[]string{"--xds-auth=serviceaccount needs TLS"}},
		{"token audience", []string{"--plaintext", "--xds-auth-audience", "a b"},
			[]string{`--xds-auth-audience "a b": must not contain white space`}},
		{"recheck too short", []string{"--plaintext", "--xds-auth-recheck", "100ms"},
			[]string{"--xds-auth-recheck 100ms: must be at least 1s"}},
		{"token auth in file mode", []string{"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--xds-auth", "serviceaccount", "-f", seedDir},
			[]string{"--xds-auth=serviceaccount needs a cluster", "cannot be used with --file"}},
		{"empty lease namespace", []string{"--plaintext", "--lease-namespace", ""},
			[]string{"--lease-namespace must not be empty"}},
		{"several at once", []string{"--cluster-domain", "a b", "--shutdown-timeout", "0s"},
			[]string{"ADS needs TLS", `--cluster-domain "a b": not a DNS domain`, "--shutdown-timeout 0s"}},
		{"two folders", []string{"--plaintext", "-f", seedDir, "-f", seedDir},
			[]string{"--file given 2 times: discovery watches one folder"}},
		{"a file", []string{"--plaintext", "-f", seedDir + "/30-inferencepool.yaml"},
			[]string{"discovery watches a folder of manifests"}},
		{"a missing folder", []string{"--plaintext", "-f", seedDir + "/nonexistent"},
			[]string{"--file: stat " + seedDir + "/nonexistent: no such file or directory"}},
		{"log format", []string{"--plaintext", "--log-format", "yaml"},
			[]string{`--log-format "yaml": want json or text`}},
		{"ads address", []string{"--plaintext", "--ads-address", "localhost"},
			[]string{`--ads-address "localhost": want [HOST]:PORT`}},
		{"http port", []string{"--plaintext", "--http-address", ":99999"},
			[]string{`--http-address ":99999": port "99999": want a number from 0 to 65535`}},
		{"lease namespace", []string{"--plaintext", "--lease-namespace", "Not_A_Namespace"},
			[]string{`--lease-namespace "Not_A_Namespace": not a namespace name`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, fakeDeps(t), append([]string{"discovery"}, tc.args...)...)
			wantErr(t, err, tc.want...)
		})
	}
}

func TestDiscoveryBadFeatureFlag(t *testing.T) {
	_, err := run(t, fakeDeps(t, "PILOT_ENABLE_GATEWAY_API_STATUS", "yes"), "discovery", "--plaintext")
	wantErr(t, err, "environment: feature flags:", `PILOT_ENABLE_GATEWAY_API_STATUS: "yes" is not a boolean`)
}

func TestDiscoveryBadKubeconfigPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	_, err := run(t, fakeDeps(t), "discovery", "--plaintext", "--kubeconfig", path)
	wantErr(t, err, "--kubeconfig", path, "no such file")
}

func TestDiscoveryNoClusterConfig(t *testing.T) {
	d := fakeDeps(t, "KUBECONFIG", "/nonexistent/a:/nonexistent/b")
	_, err := run(t, d, "discovery", "--plaintext")
	if !errors.Is(err, errNoClusterConfig) {
		t.Fatalf("err = %v, want errNoClusterConfig", err)
	}
	wantErr(t, err, "--kubeconfig (not set)", "KUBERNETES_SERVICE_HOST not set", `$KUBECONFIG="/nonexistent/a:/nonexistent/b"`,
		filepath.Join(d.home, ".kube", "config"))
}

func TestDiscoveryUnreadableTLSFiles(t *testing.T) {
	d := fakeDeps(t)
	d.newClient = func(clusterSource, ...kube.Option) (*kube.Client, error) { return kube.NewFake(), nil }
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, d, "discovery", "--kubeconfig", kc, "--tls-cert-file", "/nonexistent/c.pem", "--tls-key-file", "/nonexistent/k.pem")
	wantErr(t, err, "TLS file", "/nonexistent/c.pem")
}

// TestDiscoverySIGTERM runs the discovery command over a fake cluster, waits
// until it answers /ready, sends the process SIGTERM and checks the command
// returns nil promptly and logged its shutdown as JSON.
func TestDiscoverySIGTERM(t *testing.T) {
	logs := &logbuf.Buffer{}
	addrs := make(chan [2]net.Addr, 1)
	d := fakeDeps(t, "ENABLE_GATEWAY_API_INFERENCE_EXTENSION", "true", "KUBERNETES_SERVICE_HOST", "10.0.0.1", "POD_NAMESPACE", "infermesh-system")
	var got clusterSource
	d.newClient = func(src clusterSource, _ ...kube.Option) (*kube.Client, error) {
		got = src
		return kube.NewFake(kube.OptionalCRDs()...), nil
	}
	d.stderr = logs
	d.serving = func(ads, http, _ net.Addr) { addrs <- [2]net.Addr{ads, http} }
	done := make(chan error, 1)
	go func() {
		_, err := run(t, d, "discovery", "--plaintext", "--ads-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
			"--debug-address", "127.0.0.1:0", "--shutdown-timeout", "10s", "--log-level", "debug")
		done <- err
	}()
	var a [2]net.Addr
	select {
	case a = <-addrs:
	case err := <-done:
		t.Fatalf("discovery ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("discovery did not start serving")
	}
	if !got.InCluster {
		t.Errorf("cluster source = %+v, want in-cluster (KUBERNETES_SERVICE_HOST is set)", got)
	}
	waitReady(t, "http://"+a[1].String()+"/ready")

	start := time.Now()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("discovery after SIGTERM: %v", err)
		}
	case <-time.After(12 * time.Second):
		t.Fatal("discovery did not return within 12s of SIGTERM")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("shutdown took %s", took)
	}
	var sawStart, sawStop, sawNoAuth bool
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		switch m["msg"] {
		case "pilot-discovery starting":
			sawStart = m["leaseNamespace"] == "infermesh-system" && m["inferenceExtension"] == true
		case "pilot-discovery stopped":
			sawStop = true
		}
		sawNoAuth = sawNoAuth || (m["level"] == "WARN" && strings.HasPrefix(m["msg"].(string), "ADS serves without proxy authorization (--xds-auth=none)"))
	}
	if !sawStart || !sawStop {
		t.Errorf("logs lack the start line with its keys or the stop line:\n%s", logs.String())
	}
	if !sawNoAuth {
		t.Errorf("no warning that ADS serves without proxy authorization:\n%s", logs.String())
	}
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
