// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package epp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Timeouts of Start and Stop.
const (
	// ReadyTimeout bounds how long Start and Restart wait for readiness.
	ReadyTimeout = 90 * time.Second
	// stopGrace is how long Stop lets the EPP shut down after SIGTERM.
	stopGrace = 5 * time.Second
	// logTailOnFailure is how much of the log a failed test shows.
	logTailOnFailure = 64 << 10
)

// Config says which EPP to start and for which pool.
type Config struct {
	// Kind is LWEPP or FullEPP. Required.
	Kind Kind
	// Kubeconfig is a kubeconfig file for the cluster, such as kubeenv's
	// Env.Kubeconfig. Required.
	Kubeconfig string
	// PoolNamespace and PoolName name the InferencePool. Required.
	PoolNamespace, PoolName string
	// GRPCPort is the ext_proc port; 0 picks a free one.
	GRPCPort int
	// TLS serves ext_proc over TLS with the EPP's own self-signed certificate
	// (ALPN h2); false serves plaintext HTTP/2.
	TLS bool
	// ExtraArgs are appended to the command line, after Start's own flags.
	ExtraArgs []string
}

// validate reports the first missing field.
func (c Config) validate() error {
	switch {
	case c.Kind != LWEPP && c.Kind != FullEPP:
		return fmt.Errorf("epp: Config.Kind %q is neither %q nor %q", c.Kind, LWEPP, FullEPP)
	case c.Kubeconfig == "":
		return errors.New("epp: Config.Kubeconfig is required")
	case c.PoolNamespace == "" || c.PoolName == "":
		return errors.New("epp: Config.PoolNamespace and Config.PoolName are required")
	case c.GRPCPort < 0 || c.GRPCPort > 65535:
		return fmt.Errorf("epp: Config.GRPCPort %d out of range", c.GRPCPort)
	}
	return nil
}

// Process is one EPP child process. Its methods are for the test goroutine,
// except Addr and Logs, which are safe anywhere.
type Process struct {
	cfg   Config
	bin   string
	ports ports
	t     testing.TB
	logs  *logBuffer
	runs  int
	run   *run // nil when stopped
}

// run is one incarnation.
type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // cmd.Wait's result, readable after done
}

// Start starts cfg's EPP and returns once it is ready (see the package
// documentation). Its t.Cleanup stops the process group and, if the test
// failed, logs the tail of the EPP's output. It fails the test when cfg is
// incomplete, the binary is missing (naming hack/epp-binaries.sh), or the EPP
// exits or is not ready within ReadyTimeout, with the log's tail.
func Start(t testing.TB, cfg Config) *Process {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	bin := Binary(t, cfg.Kind)
	ps, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{cfg: cfg, bin: bin, t: t, logs: newLogBuffer(4 << 20),
		ports: ports{grpc: ps[0], health: ps[1], metrics: ps[2]}}
	if cfg.GRPCPort != 0 {
		p.ports.grpc = cfg.GRPCPort
	}
	t.Cleanup(p.cleanup)
	if err := p.startAndWait(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Addr is the ext_proc server's address, 127.0.0.1:port. It stays the same
// across Restart.
func (p *Process) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.ports.grpc))
}

// TLS reports whether the ext_proc server speaks TLS.
func (p *Process) TLS() bool { return p.cfg.TLS }

// Logs returns everything the EPP wrote to stdout and stderr so far, over all
// incarnations (each starts with a "--- epp: start" line), keeping the last
// 4 MiB.
func (p *Process) Logs() string { return p.logs.String() }

// Stop stops the EPP now (SIGTERM to its process group, SIGKILL after 5 s) and
// returns once it has exited. Stopping a stopped Process does nothing.
func (p *Process) Stop() {
	p.t.Helper()
	if err := p.stop(); err != nil {
		p.t.Error(err)
	}
}

// Restart stops the EPP if it runs and starts it again with the same ports and
// flags, returning once it is ready again. It fails t as Start does.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.startAndWait(); err != nil {
		t.Fatal(err)
	}
}

// startAndWait starts a new incarnation and waits for readiness; on failure
// the incarnation is stopped and the error carries the log's tail.
func (p *Process) startAndWait() error {
	if err := p.start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if err := p.waitReady(ctx); err != nil {
		stopErr := p.stop()
		return errors.Join(fmt.Errorf("epp: %s %s: %w; last lines of its log:\n%s",
			p.cfg.Kind, p.Addr(), err, p.logs.Tail(logTailOnFailure)), stopErr)
	}
	return nil
}

// start runs the binary under `nice -n 10` (every thread of the EPP inherits
// the niceness), in its own process group, killed by the kernel if the test
// binary dies first.
func (p *Process) start() error {
	if p.run != nil {
		return fmt.Errorf("epp: %s already running", p.cfg.Kind)
	}
	p.runs++
	a := args(p.cfg, p.ports)
	fmt.Fprintf(p.logs, "--- epp: start %d: %s %q\n", p.runs, p.bin, a)
	cmd := exec.Command("nice", append([]string{"-n", "10", p.bin}, a...)...)
	cmd.Env = childEnv(os.Environ(), p.cfg)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("epp: start %s: %w", p.cfg.Kind, err)
	}
	r := &run{cmd: cmd, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	p.run = r
	return nil
}

// stop ends the current incarnation, if any.
func (p *Process) stop() error {
	r := p.run
	if r == nil {
		return nil
	}
	p.run = nil
	pgid := -r.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-r.done:
		return nil
	case <-time.After(stopGrace):
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	select {
	case <-r.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("epp: %s (pid %d) survived SIGKILL for 10 s", p.cfg.Kind, r.cmd.Process.Pid)
	}
}

// cleanup stops the process and shows its log if the test failed.
func (p *Process) cleanup() {
	if err := p.stop(); err != nil {
		p.t.Error(err)
	}
	if p.t.Failed() {
		p.t.Logf("epp: %s log (%s, last %d KiB):\n%s", p.cfg.Kind, p.Addr(), logTailOnFailure>>10, p.logs.Tail(logTailOnFailure))
	}
}

// freePorts returns n distinct TCP ports that were free on all interfaces a
// moment ago (both EPPs bind ":port"). Another process may take one before the
// EPP binds it; the EPP then exits and Start reports its log.
func freePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, fmt.Errorf("epp: free port: %w", err)
		}
		defer l.Close() // held until all n are chosen, so they differ
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
