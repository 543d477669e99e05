// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package demotraffic runs `make demo-traffic`'s program (demo/traffic) as
// a user does and checks what it prints and what it leaves behind.
//
// The demo routes the seed's pod addresses, 10.244.0.13-16, as
// tests/integration/pilot/gie does, and `make integ` runs two packages at a
// time: both take kubeenv.LockAddresses on those addresses before making
// their namespaces, so whichever comes second waits for the other
// (architecture/ci.md).
package demotraffic

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infermesh/infermesh/demo/traffic"
	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// repo is the repository's root.
var repo = filepath.Join("..", "..", "..")

// build builds the demo's command into a temporary folder.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo-traffic")
	cmd := exec.Command("go", "build", "-o", bin, "./demo/traffic/cmd/demo-traffic")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// demoRun is one run of the demo's command.
type demoRun struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer // stdout
	errOut bytes.Buffer // stderr
	lines  chan string  // stdout lines as they come
	done   chan struct{}
}

// start runs bin from the repository's root, in a process group of its
// own (as a shell's foreground job is), so a signal sent to that group is
// what a Ctrl-C at its terminal sends.
func start(t *testing.T, bin string, env ...string) *demoRun {
	t.Helper()
	root, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	r := &demoRun{lines: make(chan string, 1000), done: make(chan struct{})}
	r.cmd = exec.Command(bin, "-repo", root)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.cmd.Env = append(os.Environ(), env...)
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stderr = &lockedWriter{mu: &r.mu, w: &r.errOut}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		defer close(r.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.mu.Lock()
			r.out.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
			select {
			case r.lines <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			_ = r.cmd.Wait()
		}
	})
	return r
}

// wait waits (at most within) for the command to exit and returns its exit
// code.
func (r *demoRun) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	exited := make(chan error, 1)
	go func() { <-r.done; exited <- r.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(within):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		t.Fatalf("the demo did not end within %v; output:\n%s", within, r.output())
	}
	return r.cmd.ProcessState.ExitCode()
}

func (r *demoRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String() + "\n--- stderr:\n" + r.errOut.String()
}

func (r *demoRun) stdout() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitLine waits (at most within) for a stdout line starting with prefix.
func (r *demoRun) waitLine(t *testing.T, prefix string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("the demo ended before printing %q; output:\n%s", prefix, r.output())
			}
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-deadline:
			t.Fatalf("no line %q within %v; output:\n%s", prefix, within, r.output())
		}
	}
}

// checkNothingLeft fails t if a network namespace of the run (named
// traffic.NetNSPrefix + its pid) or a process started from its temporary
// folder (etcd, kube-apiserver, kube-controller-manager and the EPP all
// name files there) is left.
func checkNothingLeft(t *testing.T, pid int) {
	t.Helper()
	ip, err := kubeenv.FindIP()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ip, "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	prefix := fmt.Sprintf("%s%d-", traffic.NetNSPrefix, pid)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, prefix) {
			t.Errorf("network namespace left: %s", line)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmdline, "infermesh-demo-traffic-") && !strings.Contains(cmdline, "go test") {
			t.Errorf("process left running (%s): %s", filepath.Dir(p), cmdline)
		}
	}
}

// The whole demo: requests land on the EPP's picks, the FailOpen request
// is served by the fallback, and nothing is left afterwards.
func TestDemoTraffic(t *testing.T) {
	bin := build(t)
	began := time.Now()
	r := start(t, bin)
	code := r.wait(t, 5*time.Minute)
	t.Logf("the demo took %.1f s; its output:\n%s", time.Since(began).Seconds(), r.stdout())
	if code != 0 {
		t.Fatalf("exit status %d; output:\n%s", code, r.output())
	}
	if err := traffic.CheckOutput(r.stdout(), 3); err != nil {
		t.Errorf("output shape: %v", err)
	}
	checkNothingLeft(t, r.cmd.Process.Pid)
}

// Ctrl-C at several points: the demo stops, exits 130, and leaves no
// network namespace and no process.
func TestDemoTrafficInterrupted(t *testing.T) {
	bin := build(t)
	for _, at := range []string{
		"== cluster:",        // the cluster up, no namespace yet
		"== pods,",           // namespaces being made
		"== pilot-discovery", // the EPP up, the data plane starting
	} {
		t.Run(strings.Trim(at, "=, :"), func(t *testing.T) {
			r := start(t, bin)
			r.waitLine(t, at, 3*time.Minute)
			// A Ctrl-C signals the terminal's foreground process group.
			if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			code := r.wait(t, 2*time.Minute)
			out := r.stdout()
			if code != 130 {
				t.Errorf("exit status %d after Ctrl-C, want 130; output:\n%s", code, r.output())
			}
			if !strings.Contains(out, "interrupted: stopping what was started") || !strings.Contains(out, "stopped everything it started") {
				t.Errorf("output does not say it stopped everything:\n%s", r.output())
			}
			checkNothingLeft(t, r.cmd.Process.Pid)
		})
	}
}

// A failure half-way (the EPP exits at start: a stand-in binary that
// fails, after the cluster, the pods' namespaces and pilot-discovery are
// up): the demo says so, exits 1 and leaves nothing behind.
func TestDemoTrafficFailure(t *testing.T) {
	bin := build(t)
	// Laid out as hack/epp-binaries.sh leaves a build, with its build record
	// (pkg/test/epp refuses a binary without one).
	dir := filepath.Join(t.TempDir(), "lwepp-"+epp.LWEPPVersion)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	fake := "#!/bin/sh\necho 'a failing stand-in for the EPP' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "lwepp"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	record := "sigs.k8s.io/gateway-api-inference-extension " + epp.LWEPPVersion + "\n"
	if err := os.WriteFile(filepath.Join(dir, "VERSIONS"), []byte(record), 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, bin, "EPP_TEST_BINARIES="+filepath.Join(dir, "bin"))
	code := r.wait(t, 3*time.Minute)
	out := r.stdout()
	if code != 1 {
		t.Errorf("exit status %d, want 1; output:\n%s", code, r.output())
	}
	if !strings.Contains(out, "\nfailed: epp: ") || strings.Contains(out, "another GIE release") || !strings.Contains(out, "stopped everything it started") ||
		!strings.Contains(out, "== pods,") {
		t.Errorf("want the pods made, then the stand-in EPP's failure (not a refusal of its version), then everything stopped; output:\n%s", r.output())
	}
	checkNothingLeft(t, r.cmd.Process.Pid)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}
