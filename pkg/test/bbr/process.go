// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package bbr

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BinariesEnv names the environment variable pointing at the folder that
// holds the bbr binary: the folder hack/bbr-binaries.sh prints.
const BinariesEnv = "BBR_TEST_BINARIES"

// Bounds of Start, Restart and Stop.
const (
	// ReadyTimeout bounds how long Start and Restart wait for the ext_proc
	// port to complete a TLS handshake.
	ReadyTimeout = 60 * time.Second
	// stopGrace is how long Stop lets the manager end after SIGTERM.
	stopGrace = 5 * time.Second
	// logMax is how much of the output is kept.
	logMax = 1 << 20
)

var errNoBinary = errors.New("bbr: body-based router binary not found; build it with hack/bbr-binaries.sh (or `make integ`) and set " +
	BinariesEnv + " to the folder it prints")

// Binary returns the path of bbr in $BBR_TEST_BINARIES. It fails the test,
// never skips it, when the variable is unset or the binary is missing.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := findBinary(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func findBinary(getenv func(string) string) (string, error) {
	dir := getenv(BinariesEnv)
	if dir == "" {
		return "", fmt.Errorf("%w: %s is not set", errNoBinary, BinariesEnv)
	}
	p := filepath.Join(dir, "bbr")
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoBinary, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s is not an executable file", errNoBinary, p)
	}
	return p, nil
}

// Config says what BBR talks to.
type Config struct {
	// Kubeconfig is a kubeconfig file for the cluster (kubeenv's
	// Env.Kubeconfig). Required: BBR will not start without a REST config.
	Kubeconfig string
}

// Process is one BBR child process. Addr and Logs are safe anywhere; the
// other methods are for the test goroutine.
type Process struct {
	cfg   Config
	bin   string
	t     testing.TB
	ports [3]int // ext_proc, gRPC health, metrics
	out   *output
	runs  int
	cmd   *exec.Cmd
	done  chan struct{} // closed once cmd has exited; nil when stopped
}

// Start starts BBR with --streaming and returns once its ext_proc port
// completes a TLS handshake. It fails the test when the kubeconfig is
// missing, the binary is missing, or BBR exits or is not ready within
// ReadyTimeout, with its output.
func Start(t testing.TB, cfg Config) *Process {
	t.Helper()
	if cfg.Kubeconfig == "" {
		t.Fatal("bbr: Config.Kubeconfig is required")
	}
	p := &Process{cfg: cfg, bin: Binary(t), t: t, out: &output{}}
	if err := p.freePorts(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.cleanup)
	if err := p.startAndWait(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Addr is the ext_proc server's address, 127.0.0.1:port, the same across
// Restart.
func (p *Process) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.ports[0])) }

// Logs is BBR's output so far (each incarnation starts with a
// "--- bbr: start" line), the last MiB of it.
func (p *Process) Logs() string { return p.out.String() }

// Stop stops BBR and returns once it has exited; then nothing listens on
// its ports. Stopping a stopped Process does nothing.
func (p *Process) Stop() {
	p.t.Helper()
	if err := p.stop(); err != nil {
		p.t.Error(err)
	}
}

// Restart starts BBR again on the same ports, returning once it is ready.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.startAndWait(); err != nil {
		t.Fatal(err)
	}
}

// freePorts chooses three distinct ports that were free on every address a
// moment ago (BBR binds ":port").
func (p *Process) freePorts() error {
	for i := range p.ports {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return fmt.Errorf("bbr: free port: %w", err)
		}
		defer l.Close() // held until all are chosen, so they differ
		p.ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return nil
}

func (p *Process) startAndWait() error {
	if err := p.start(); err != nil {
		return err
	}
	if err := p.waitReady(); err != nil {
		return errors.Join(fmt.Errorf("%w; its output:\n%s", err, p.out), p.stop())
	}
	return nil
}

// start runs the binary under `nice -n 10` in its own process group,
// killed by the kernel if the test binary dies first.
func (p *Process) start() error {
	if p.done != nil {
		return errors.New("bbr: already running")
	}
	p.runs++
	args := []string{"-n", "10", p.bin, "--streaming",
		"--grpc-port", strconv.Itoa(p.ports[0]), "--grpc-health-port", strconv.Itoa(p.ports[1]),
		"--metrics-port", strconv.Itoa(p.ports[2])}
	fmt.Fprintf(p.out, "--- bbr: start %d: nice %q\n", p.runs, args)
	cmd := exec.Command("nice", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.cfg.Kubeconfig)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bbr: start: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// waitReady polls (bounded) until the ext_proc port completes a TLS
// handshake, failing at once if the process exits.
func (p *Process) waitReady() error {
	deadline := time.Now().Add(ReadyTimeout)
	for interval := 5 * time.Millisecond; ; interval = min(2*interval, 200*time.Millisecond) {
		d := &net.Dialer{Timeout: time.Second}
		// BBR's certificate is self-signed and made at start: only the
		// handshake is checked.
		c, err := tls.DialWithDialer(d, "tcp", p.Addr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // readiness only
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("bbr: exited before serving on %s (%v)", p.Addr(), p.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bbr: %s not serving TLS within %v: %v", p.Addr(), ReadyTimeout, err)
		}
		time.Sleep(interval) // back-off of a bounded poll on a real socket
	}
}

// stop ends the current incarnation, if any: SIGTERM to its group, SIGKILL
// after stopGrace.
func (p *Process) stop() error {
	if p.done == nil {
		return nil
	}
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	pgid := -cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(stopGrace):
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("bbr: pid %d survived SIGKILL for 10 s", cmd.Process.Pid)
	}
}

func (p *Process) cleanup() {
	if err := p.stop(); err != nil {
		p.t.Error(err)
	}
	if p.t.Failed() {
		p.t.Logf("bbr: output (%s):\n%s", p.Addr(), p.out)
	}
}

// output keeps the last logMax bytes written.
type output struct {
	mu   sync.Mutex
	kept []byte
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kept = append(o.kept, b...)
	if over := len(o.kept) - logMax; over > 0 {
		o.kept = append(o.kept[:0], o.kept[over:]...)
	}
	return len(b), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.kept)
}
