// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// TestDiscoveryTLSEndToEnd runs the discovery command with ADS over TLS on
// a fake cluster holding the seed's objects, reads the seed Gateway's
// clusters with proxy-config as its Envoy would, checks a plaintext client
// is refused, and stops the server with SIGTERM.
func TestDiscoveryTLSEndToEnd(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	kc := touch(t, dir+"/kubeconfig")
	objs := append([]runtime.Object{}, kube.OptionalCRDs()...)
	objs = append(objs, seed.GatewayClassObject(), seed.Gateway(), seed.HTTPRoute(), seed.InferencePool(), seed.EPPService())
	d := fakeDeps(t, "ENABLE_GATEWAY_API_INFERENCE_EXTENSION", "true")
	d.newClient = func(src clusterSource, _ ...kube.Option) (*kube.Client, error) {
		if src.Kubeconfig != kc {
			t.Errorf("cluster source %+v, want --kubeconfig %s", src, kc)
		}
		return kube.NewFake(objs...), nil
	}
	addrs := make(chan net.Addr, 1)
	d.serving = func(ads, _, _ net.Addr) { addrs <- ads }
	done := make(chan error, 1)
	go func() {
		_, err := run(t, d, "discovery", "--kubeconfig", kc, "--tls-cert-file", cert, "--tls-key-file", key,
			"--ads-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--debug-address", "",
			"--push-debounce", "10ms")
		done <- err
	}()
	var ads net.Addr
	select {
	case ads = <-addrs:
	case err := <-done:
		t.Fatalf("discovery ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("discovery did not start serving")
	}
	stopped := false
	defer func() {
		if stopped {
			return
		}
		select {
		case <-done: // already ended: a signal now would kill the test binary
		default:
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
			<-done
		}
	}()

	out, err := pc(t, ads.String(), "clusters", "--ca-file", cert, "--timeout", "20s")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(seedClustersFromServer, out); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := pc(t, ads.String(), "clusters", "--plaintext", "--timeout", "2s"); err == nil || errors.Is(err, errNoConfig) {
		t.Errorf("plaintext client: err = %v, want a connection error", err)
	}

	stopped = true
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	case <-time.After(12 * time.Second):
		t.Fatal("no return within 12s of SIGTERM")
	}
}
