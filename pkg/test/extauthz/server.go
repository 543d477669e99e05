// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extauthz

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// Bounds of Start, Restart and Stop.
const (
	// ReadyTimeout bounds how long Start and Restart wait for both ports.
	ReadyTimeout = 30 * time.Second
	// stopGrace is how long Stop lets the server end after SIGTERM (it
	// stops both servers and exits at once).
	stopGrace = 5 * time.Second
)

// Config says where the server runs.
type Config struct {
	// NetNS is the test's network namespace the server runs in. Required:
	// the server binds every address of its namespace.
	NetNS *kubeenv.NetNS
	// IP is the address of NetNS the server is reached at. Required.
	IP string
	// GRPCPort and HTTPPort are its two ports. Required, distinct, and free
	// on every address of NetNS (a listener on one address and port there,
	// such as a model server's, takes the port from the server).
	GRPCPort, HTTPPort int
}

func (c Config) validate() error {
	switch {
	case c.NetNS == nil:
		return errors.New("extauthz: Config.NetNS is required: the server binds every address of its network namespace")
	case net.ParseIP(c.IP) == nil:
		return fmt.Errorf("extauthz: Config.IP %q is not an IP address", c.IP)
	case c.GRPCPort <= 0 || c.GRPCPort > 65535 || c.HTTPPort <= 0 || c.HTTPPort > 65535:
		return fmt.Errorf("extauthz: ports %d (gRPC) and %d (HTTP) must be in 1-65535", c.GRPCPort, c.HTTPPort)
	case c.GRPCPort == c.HTTPPort:
		return fmt.Errorf("extauthz: the gRPC and HTTP ports are both %d", c.GRPCPort)
	}
	return nil
}

// Server is the authorization server's child process. Its methods are for
// the test goroutine, except the address methods, Decisions and Logs, which
// are safe anywhere.
type Server struct {
	cfg  Config
	bin  string
	t    testing.TB
	out  *output
	runs int
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited; nil when stopped
}

// Start starts the server in cfg.NetNS and returns once both ports accept
// connections at cfg.IP. It fails the test when cfg is incomplete, the
// binary is missing (naming hack/extauthz-binary.sh), or the server exits or
// does not listen within ReadyTimeout, with its output.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: cfg, bin: Binary(t), t: t, out: &output{}}
	t.Cleanup(s.cleanup)
	if err := s.startAndWait(); err != nil {
		t.Fatal(err)
	}
	return s
}

// GRPCAddr is IP:GRPCPort.
func (s *Server) GRPCAddr() string { return net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.cfg.GRPCPort)) }

// HTTPAddr is IP:HTTPPort.
func (s *Server) HTTPAddr() string { return net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.cfg.HTTPPort)) }

// Decisions are the checks the server answered so far, over every
// incarnation.
func (s *Server) Decisions() Decisions { return s.out.decisions() }

// Logs is the server's output so far (each incarnation starts with a
// "--- extauthz: start" line), the last MiB of it.
func (s *Server) Logs() string { return s.out.String() }

// Stop stops the server and returns once it has exited; then nothing
// listens on its ports. Stopping a stopped Server does nothing.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.stop(); err != nil {
		s.t.Error(err)
	}
}

// Restart starts a stopped server again (or restarts a running one) on the
// same ports, returning once it listens.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.startAndWait(); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) startAndWait() error {
	if err := s.start(); err != nil {
		return err
	}
	if err := s.waitListening(); err != nil {
		return errors.Join(fmt.Errorf("%w; its output:\n%s", err, s.out), s.stop())
	}
	return nil
}

// start runs the binary under `nice -n 10`, in its own process group, from
// a thread switched into the namespace (so the process is born there),
// killed by the kernel if the test binary dies first.
func (s *Server) start() error {
	if s.done != nil {
		return errors.New("extauthz: already running")
	}
	s.runs++
	args := []string{"-n", "10", s.bin, "-grpc", strconv.Itoa(s.cfg.GRPCPort), "-http", strconv.Itoa(s.cfg.HTTPPort)}
	fmt.Fprintf(s.out, "--- extauthz: start %d in netns %s: nice %q\n", s.runs, s.cfg.NetNS.Name, args)
	cmd := exec.Command("nice", args...)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cfg.NetNS.Run(cmd.Start); err != nil {
		return fmt.Errorf("extauthz: start in netns %s: %w", s.cfg.NetNS.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	return nil
}

// waitListening polls (bounded) until both ports accept a TCP connection at
// IP, failing at once if the process exits.
func (s *Server) waitListening() error {
	deadline := time.Now().Add(ReadyTimeout)
	for _, addr := range []string{s.GRPCAddr(), s.HTTPAddr()} {
		for interval := 5 * time.Millisecond; ; interval = min(2*interval, 200*time.Millisecond) {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-s.done:
				return fmt.Errorf("extauthz: exited before listening on %s (%v)", addr, s.cmd.ProcessState)
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("extauthz: %s not accepting within %v: %v", addr, ReadyTimeout, err)
			}
			time.Sleep(interval) // back-off of a bounded poll on a real socket
		}
	}
	return nil
}

// stop ends the current incarnation, if any: SIGTERM to its group, SIGKILL
// after stopGrace.
func (s *Server) stop() error {
	if s.done == nil {
		return nil
	}
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
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
		return fmt.Errorf("extauthz: pid %d survived SIGKILL for 10 s", cmd.Process.Pid)
	}
}

func (s *Server) cleanup() {
	if err := s.stop(); err != nil {
		s.t.Error(err)
	}
	if s.t.Failed() {
		s.t.Logf("extauthz: output (%s, %s):\n%s", s.GRPCAddr(), s.HTTPAddr(), s.out)
	}
}
