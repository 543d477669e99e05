// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package install_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/infermesh/infermesh/pkg/test/poll"
)

// adsServerName is the name the ADS certificate is issued for and clients
// check: the Service of manifests/20-deployment.yaml.
const adsServerName = "pilot-discovery.infermesh-system.svc"

// buildPilot builds pilot-discovery from this checkout into a temporary
// folder and returns the binary's path.
func buildPilot(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pilot-discovery")
	cmd := exec.Command("go", "build", "-o", bin, "./pilot/cmd/pilot-discovery")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build pilot-discovery: %v\n%s", err, out)
	}
	return bin
}

// adsTLS is a throwaway CA and an ADS server certificate it signed, for
// adsServerName and 127.0.0.1.
type adsTLS struct {
	caPool            *x509.CertPool
	certFile, keyFile string
}

func newADSTLS(t *testing.T, dir string) adsTLS {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "install-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	ca, err := x509.ParseCertificate(caDER)
	must(err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: adsServerName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{adsServerName}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	must(err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	must(err)
	s := adsTLS{caPool: x509.NewCertPool(), certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	s.caPool.AddCert(ca)
	must(os.WriteFile(s.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(os.WriteFile(s.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return s
}

// writeTokenKubeconfig writes a kubeconfig for the API server of admin that
// authenticates with token alone: none of admin's credentials are copied.
func writeTokenKubeconfig(t *testing.T, path string, admin *rest.Config, token string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeenv"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	cfg.AuthInfos["pilot-discovery"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["pilot-discovery"] = &clientcmdapi.Context{Cluster: "kubeenv", AuthInfo: "pilot-discovery"}
	cfg.CurrentContext = "pilot-discovery"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// deploymentCommand returns the arguments and environment of the
// pilot-discovery container of the shipped Deployment, as the kubelet would
// give them to the process: $(VAR) references expanded, the downward API's
// metadata.namespace resolved. Flags in override replace the Deployment's
// value of the same flag (addresses and file paths that differ off-cluster).
func deploymentCommand(t *testing.T, objs []*unstructured.Unstructured, override map[string]string) (args, env []string) {
	t.Helper()
	var d *appsv1.Deployment
	for _, u := range objs {
		if u.GetKind() == "Deployment" && u.GetName() == "pilot-discovery" {
			d = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d == nil || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("manifests: no Deployment pilot-discovery with one container")
	}
	c := d.Spec.Template.Spec.Containers[0]
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			vars[e.Name] = d.Namespace
		case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
			// The kubelet gives the limit in bytes (divisor 1).
			vars[e.Name] = strconv.FormatInt(c.Resources.Limits.Memory().Value(), 10)
		default:
			t.Fatalf("env %s: the test cannot resolve %v", e.Name, e.ValueFrom)
		}
		env = append(env, e.Name+"="+vars[e.Name])
	}
	seen := map[string]bool{}
	for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
		a = expand(a, vars)
		if name, _, ok := strings.Cut(a, "="); ok {
			if v, ok := override[name]; ok {
				a, seen[name] = name+"="+v, true
			}
		}
		args = append(args, a)
	}
	for name, v := range override {
		if !seen[name] {
			args = append(args, name+"="+v)
		}
	}
	return args, env
}

// expand replaces $(NAME) with vars[NAME], as the kubelet does.
func expand(s string, vars map[string]string) string {
	for name, v := range vars {
		s = strings.ReplaceAll(s, "$("+name+")", v)
	}
	return s
}

// pilotProcess is pilot-discovery running as a child process.
type pilotProcess struct {
	cmd      *exec.Cmd
	logPath  string
	done     chan struct{}
	waitErr  error
	ads      string // bound ADS address
	httpAddr string // bound HTTP address
	stopped  bool   // stop was called (from the test goroutine or cleanup)
}

// startPilot runs bin with args and env (and nothing of the test's own
// environment but PATH), logging to a file, and returns once it has bound
// its ports. Its t.Cleanup stops it (SIGTERM, then SIGKILL) and attaches
// its log when the test failed.
func startPilot(t *testing.T, bin string, args, env []string) *pilotProcess {
	t.Helper()
	dir := t.TempDir()
	p := &pilotProcess{logPath: filepath.Join(dir, "pilot-discovery.log"), done: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	t.Logf("starting %s %s", filepath.Base(bin), strings.Join(args, " "))
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		already := p.stopped
		if err := p.stop(); err != nil && !already { // the test reported it
			t.Errorf("pilot-discovery: %v", err)
		}
		if t.Failed() {
			t.Logf("pilot-discovery log:\n%s", p.log(t))
		}
	})
	poll.UntilOr(t, time.Minute, "pilot-discovery listening", func() bool {
		select {
		case <-p.done:
			t.Fatalf("pilot-discovery exited before serving: %v\n%s", p.waitErr, p.log(t))
		default:
		}
		p.ads, p.httpAddr = p.startLine(t)
		return p.ads != ""
	}, func() string { return p.log(t) })
	return p
}

// startLine reads the bound addresses from the "pilot-discovery starting"
// log line; empty until it is written.
func (p *pilotProcess) startLine(t *testing.T) (ads, httpAddr string) {
	for _, l := range p.logLines(t) {
		if l["msg"] == "pilot-discovery starting" {
			ads, _ = l["ads"].(string)
			httpAddr, _ = l["http"].(string)
		}
	}
	return ads, httpAddr
}

// logLines parses the JSON log lines written so far; lines that are not
// JSON (client-go writing before the logger is set) come back as {"raw": line}.
func (p *pilotProcess) logLines(t *testing.T) []map[string]any {
	f, err := os.Open(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for s.Scan() {
		m := map[string]any{}
		if err := json.Unmarshal(s.Bytes(), &m); err != nil {
			m = map[string]any{"raw": s.Text()}
		}
		out = append(out, m)
	}
	return out
}

func (p *pilotProcess) log(t *testing.T) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stop sends SIGTERM and waits for the exit (up to 30 s, then SIGKILL). It
// returns the process's error for anything but a clean exit; calling it
// again returns the same.
func (p *pilotProcess) stop() error {
	p.stopped = true
	select {
	case <-p.done:
		return p.exitErr()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exitErr()
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("did not exit within 30s of SIGTERM; killed")
	}
}

func (p *pilotProcess) exitErr() error {
	if p.waitErr != nil {
		return fmt.Errorf("exit: %w", p.waitErr)
	}
	return nil
}
