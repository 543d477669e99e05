// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package xdsbench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/infermesh/infermesh/pkg/test/adsclient"
)

// buildPilot builds pilot-discovery from this checkout into a temporary
// folder and returns its path.
func buildPilot(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "pilot-discovery")
	build := exec.Command("go", "build", "-o", bin, "./pilot/cmd/pilot-discovery")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// dialADS connects to a pilot-discovery process's ADS address (plaintext)
// without a receive limit, as Envoy's ADS client (EnvoyGrpc
// max_receive_message_length defaults to 0, unlimited): a Gateway of
// 10,000 pools has a 7 MB CDS response, over gRPC-Go's 4 MiB default. The
// connection is closed by b's cleanup.
func dialADS(b *testing.B, addr string) *grpc.ClientConn {
	b.Helper()
	return adsclient.Dial(b, addr, adsclient.MaxRecvMsgSize(math.MaxInt32))
}

// pilotProcess is pilot-discovery run as a user runs it: its own process,
// a kubeconfig, plaintext ADS, the inference extension on, every listener
// on a free loopback port.
type pilotProcess struct {
	cmd *exec.Cmd
	// began is just before exec.
	began time.Time
	// ads, http and debug are the bound addresses, from the start-up log line.
	ads, http, debug string
	logs             lockedBuffer
	exited           chan struct{}
}

// startPilotProcess execs bin with the discovery command and extra flags,
// and returns once its start-up log line names the bound addresses. Its
// cleanup stops it (SIGTERM) if Stop was not called.
func startPilotProcess(b *testing.B, bin, kubeconfig string, extra ...string) *pilotProcess {
	b.Helper()
	args := append([]string{"discovery", "--kubeconfig", kubeconfig, "--plaintext",
		"--ads-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--debug-address", "127.0.0.1:0",
		"--lease-namespace", "default"}, extra...)
	p := &pilotProcess{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = []string{"ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true", "PILOT_GATEWAY_XDS_PLAINTEXT=true", "HOME=" + b.TempDir()}
	// A benchmark killed before its cleanups (a timeout, a signal) takes
	// the process with it, as kubeenv's processes.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	p.began = time.Now()
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Stop)
	addrs := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		sent := false
		for sc.Scan() {
			p.logs.write(append(sc.Bytes(), '\n'))
			var m map[string]any
			if !sent && json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "pilot-discovery starting" {
				addrs <- m
				sent = true
			}
		}
		// A line past the scanner's limit ends the scan: keep reading, so
		// the process never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	select {
	case m := <-addrs:
		p.ads, p.http, p.debug = fmt.Sprint(m["ads"]), fmt.Sprint(m["http"]), fmt.Sprint(m["debug"])
	case <-p.exited:
		b.Fatalf("pilot-discovery exited before it started:\n%s", p.logs.tail(8<<10))
	case <-time.After(time.Minute):
		b.Fatalf("pilot-discovery did not start:\n%s", p.logs.tail(8<<10))
	}
	return p
}

// Stop sends SIGTERM and waits for the process to exit (SIGKILL after
// 30 s, so a CPU profile has time to be written). Calling it again does
// nothing.
func (p *pilotProcess) Stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitReady polls /ready every 10 ms until it answers 200 and returns
// when it did; it fails the benchmark after d or if the process exits.
func (p *pilotProcess) waitReady(b *testing.B, d time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(d)
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := client.Get("http://" + p.http + "/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Now()
			}
		}
		select {
		case <-p.exited:
			b.Fatalf("pilot-discovery exited before /ready:\n%s", p.logs.tail(8<<10))
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("pilot-discovery not ready within %v:\n%s", d, p.logs.tail(8<<10))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitQuiet returns once a 10 s window of the process costs under 0.1 s
// of CPU (its initial writes are over), and how long after now that was;
// it fails the benchmark after d.
func (p *pilotProcess) waitQuiet(b *testing.B, d time.Duration) time.Duration {
	b.Helper()
	began := time.Now()
	pid := p.cmd.Process.Pid
	for prev := cpuSeconds(b, pid); ; {
		time.Sleep(10 * time.Second)
		c := cpuSeconds(b, pid)
		if c-prev < 0.1 {
			return time.Since(began)
		}
		if time.Since(began) > d {
			b.Fatalf("pilot-discovery still busy %v after ready (%.2f s CPU in the last 10 s)", d, c-prev)
		}
		prev = c
	}
}

// saveHeap writes the process's heap profile (from the debug listener) to
// path.
func (p *pilotProcess) saveHeap(b *testing.B, path string) {
	b.Helper()
	resp, err := http.Get("http://" + p.debug + "/debug/pprof/heap")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
}

// lockedBuffer is the process's log, written by the reader goroutine and
// read by the benchmark.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
}

// tail returns the last n bytes of the log.
func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf.Bytes()
	return string(b[max(0, len(b)-n):])
}

// lines returns the JSON log lines whose msg is msg, decoded.
func (l *lockedBuffer) lines(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range bytes.Lines(l.buf.Bytes()) {
		var m map[string]any
		if bytes.Contains(line, []byte(msg)) && json.Unmarshal(line, &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// cpuSeconds is the process's user+system CPU time (/proc/PID/stat fields
// 14 and 15, in clock ticks of 100 Hz, the Linux USER_HZ).
func cpuSeconds(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// procStatus reads the kB figures of /proc/PID/status.
func procStatus(b *testing.B, pid int) map[string]float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(raw)) {
		k, v, ok := strings.Cut(line, ":")
		if f := strings.Fields(v); ok && len(f) == 2 && f[1] == "kB" {
			out[k], _ = strconv.ParseFloat(f[0], 64)
		}
	}
	return out
}
