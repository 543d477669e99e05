// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package install_test

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/infermesh/infermesh/pkg/test/adsclient"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// configPaths are the HTTP endpoints that show a Gateway's configuration
// (or the proxies', or the process's command line): a caller from another
// namespace must get none of them from any port on the network.
var configPaths = []string{
	"/debug/config_dump?gateway=" + seed.GatewayNamespace + "/" + seed.GatewayName,
	"/debug/syncz", "/debug/krtz", "/debug/features",
	"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=2",
}

// TestDebugPortRefusesOtherNamespaces: the debug endpoints answer no other
// namespace's pod. pilot-discovery
// runs with the shipped Deployment's addresses (only the ports changed to
// free ones), so it listens where it would in the pod. A pod of another
// namespace, with its own ServiceAccount token, tries every endpoint that
// shows a Gateway's configuration on every port pilot-discovery listens on
// beyond loopback (read from /proc: no port is left out), over HTTP, HTTPS
// and ADS, and gets nothing. On loopback, where only kubectl port-forward
// reaches in a cluster, the debug endpoints answer.
func TestDebugPortRefusesOtherNamespaces(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	admin := env.RESTConfig()
	kc := kubernetes.NewForConfigOrDie(admin)
	objs := applyManifests(t, admin)
	applySeed(t, kc, admin)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeTokenKubeconfig(t, kubeconfig, admin, token(t, kc, installNamespace, serviceAccount))
	certs := newADSTLS(t, dir)

	override := freePorts(t, objs)
	override["--tls-cert-file"], override["--tls-key-file"], override["--kubeconfig"] = certs.certFile, certs.keyFile, kubeconfig
	args, penv := deploymentCommand(t, objs, override)
	p := startPilot(t, buildPilot(t), args, penv)

	// The seed Gateway's configuration is published: its own proxy gets it.
	conn := adsConn(t, p.ads, certs.caPool)
	poll.Until(t, wait, "the seed Gateway's ServiceAccount gateway-istio", func() bool {
		_, err := kc.CoreV1().ServiceAccounts(seed.GatewayNamespace).Get(t.Context(), "gateway-istio", metav1.GetOptions{})
		return err == nil
	})
	openProxy(t, conn, "seed-proxy", seedGatewayRef, podToken(t, kc, seed.GatewayNamespace, "gateway-istio", xdsAudience), wait).clusters(t, shadowCluster)

	// A token good for our ADS audience, of a ServiceAccount of another
	// namespace.
	ensureServiceAccount(t, kc, seed.Namespace, "intruder")
	intruder := podToken(t, kc, seed.Namespace, "intruder", xdsAudience)
	var loopback []string
	for _, l := range listeningSockets(t, p.cmd.Process.Pid) {
		if l.IP.IsLoopback() {
			loopback = append(loopback, l.String())
			continue
		}
		addr := dialAddress(t, l)
		t.Logf("pilot-discovery listens on %s beyond loopback; trying it at %s", l, addr)
		for _, path := range configPaths {
			for _, scheme := range []string{"http", "https"} {
				if code, body, err := getWithToken(scheme+"://"+addr+path, intruder); err == nil && code < 300 {
					t.Errorf("%s (listening on %s) answered %s%s to another namespace's token: %d, body starts %q",
						addr, l, scheme, path, code, head(body))
				}
			}
		}
		if n, err := adsClusters(t, addr, certs, intruder); err == nil {
			t.Errorf("%s (listening on %s) served ADS to another namespace's token: %d clusters", addr, l, n)
		}
	}
	// The ADS port refuses the token itself, not only for want of HTTP.
	openProxy(t, conn, "intruder", seedGatewayRef, intruder, wait).denied(t, codes.PermissionDenied)

	// Inside the pod (loopback), the debug endpoints answer: the checks
	// above would have seen the configuration had it been there.
	found := false
	for _, addr := range loopback {
		code, body, err := getWithToken("http://"+addr+configPaths[0], "")
		if err == nil && code == http.StatusOK && strings.Contains(body, shadowCluster) {
			found = true
		}
	}
	if !found {
		t.Errorf("no loopback listener of %v serves the seed Gateway's config_dump", loopback)
	}
}

// adsClusters opens an ADS stream to addr over TLS as a proxy of the seed
// Gateway with token, asks for CDS and returns how many clusters the first
// response holds, or the error that came first (no ADS server there, or a
// refusal).
func adsClusters(t *testing.T, addr string, certs adsTLS, token string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := adsclient.OpenSotW(ctx, adsConn(t, addr, certs.caPool), proxyNode("intruder", seedGatewayRef), adsclient.Token(token))
	if err != nil {
		return 0, err
	}
	defer s.Close()
	if err := s.Request(resource.ClusterType); err != nil {
		return 0, err
	}
	r, err := s.Recv(10 * time.Second)
	return len(r.GetResources()), err
}

// freePorts returns, for every --*-address flag of the shipped Deployment,
// the same host with port 0: the process binds the interfaces the pod would
// and the kernel picks free ports.
func freePorts(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	args, _ := deploymentCommand(t, objs, nil)
	out := map[string]string{}
	for _, a := range args {
		name, v, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(name, "--") || !strings.HasSuffix(name, "-address") {
			continue
		}
		host, _, err := net.SplitHostPort(v)
		if err != nil {
			t.Fatalf("Deployment flag %s: %v", a, err)
		}
		out[name] = net.JoinHostPort(host, "0")
	}
	if len(out) == 0 {
		t.Fatal("the Deployment has no --*-address flags")
	}
	return out
}

// listeningSockets returns the TCP sockets process pid listens on, read
// from /proc (its socket file descriptors matched against the LISTEN
// entries of /proc/<pid>/net/tcp and tcp6).
func listeningSockets(t *testing.T, pid int) []*net.TCPAddr {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var out []*net.TCPAddr
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			const listen = "0A"
			if len(f) < 10 || f[3] != listen || !inodes[f[9]] {
				continue
			}
			out = append(out, procAddr(t, f[1]))
		}
	}
	if len(out) == 0 {
		t.Fatalf("pilot-discovery (pid %d) listens on nothing", pid)
	}
	return out
}

// procAddr parses /proc/net/tcp's "IP:PORT" in hex, the IP as 32-bit words
// in host (little-endian) order.
func procAddr(t *testing.T, s string) *net.TCPAddr {
	t.Helper()
	ipHex, portHex, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(ipHex)
	port, perr := strconv.ParseUint(portHex, 16, 16)
	if err != nil || perr != nil || (len(raw) != 4 && len(raw) != 16) {
		t.Fatalf("/proc/net/tcp address %q", s)
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		for i := range 4 {
			ip[w+i] = raw[w+3-i]
		}
	}
	return &net.TCPAddr{IP: ip, Port: int(port)}
}

// dialAddress is how another pod reaches listener l: a socket bound to all
// interfaces is dialled on this host's first address beyond loopback (on
// loopback only when the host has none: the same socket answers).
func dialAddress(t *testing.T, l *net.TCPAddr) string {
	t.Helper()
	if !l.IP.IsUnspecified() {
		return net.JoinHostPort(l.IP.String(), strconv.Itoa(l.Port))
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return net.JoinHostPort(n.IP.String(), strconv.Itoa(l.Port))
		}
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port))
}

// getWithToken GETs url with "Authorization: Bearer token" (none when
// empty), trusting any certificate: the test asks whether anything is
// served, not whether the server is who it claims.
func getWithToken(url, token string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}

func head(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}
