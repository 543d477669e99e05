// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package xdsbench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// BenchmarkPilotResources measures pilot-discovery's resident memory and
// CPU as a separate process against the real cluster holding the objects of
// BenchmarkChangeToPush (1,000 InferencePools with one HTTPRoute each on 10
// Gateways, 3,000 pods). After /ready it waits until the initial writes
// (1,000 pool and route statuses, shadow Services, 10 Gateway deployments)
// are over: a 10 s window under 0.1 s of CPU. It then reports rss-MiB
// (VmRSS), rss-anon-MiB (RssAnon: private memory, without the binary's
// file-backed pages), idle-cpu-% (of one core, over 30 s) and
// startup-cpu-s (CPU from start to idle). Run it alone:
//
//	KUBE_TEST_BINARIES=$(hack/k8s-test-binaries.sh)/bin \
//	  go test -tags=integ -run '^$' -bench PilotResources -benchtime 1x -timeout 30m ./tests/integration/xdsbench/
func BenchmarkPilotResources(b *testing.B) {
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	b.Cleanup(func() { slog.SetDefault(prev) })
	env := kubeenv.Start(b, kubeenv.WithStandardCRDs())
	admin, err := kube.NewFromRESTConfig(env.RESTConfig(), kube.WithQPS(clientQPS), kube.WithBurst(clientBurst))
	if err != nil {
		b.Fatal(err)
	}
	setUp(b, admin)
	dir := b.TempDir()
	bin := filepath.Join(dir, "pilot-discovery")
	build := exec.Command("go", "build", "-o", bin, "./pilot/cmd/pilot-discovery")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	rc := env.RESTConfig()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeenv"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts["admin"] = &clientcmdapi.Context{Cluster: "kubeenv", AuthInfo: "admin"}
	cfg.CurrentContext = "admin"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		measurePilot(b, bin, kubeconfig)
	}
}

func measurePilot(b *testing.B, bin, kubeconfig string) {
	var logs bytes.Buffer
	cmd := exec.Command(bin, "discovery", "--kubeconfig", kubeconfig, "--plaintext",
		"--ads-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--lease-namespace", "default")
	cmd.Env = []string{"ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true", "PILOT_GATEWAY_XDS_PLAINTEXT=true", "HOME=" + b.TempDir()}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	httpAddr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		sent := false
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
			var m map[string]any
			if !sent && json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "pilot-discovery starting" {
				httpAddr <- fmt.Sprint(m["http"])
				sent = true
			}
		}
	}()
	var addr string
	select {
	case addr = <-httpAddr:
	case <-time.After(time.Minute):
		b.Fatal("pilot-discovery did not start")
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("pilot-discovery not ready within 5 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	pid := cmd.Process.Pid
	readyAt := time.Now()
	// After ready the leader writes every status and shadow Service of the
	// 1,000 pools (client-side rate limited); idle starts when a 10 s
	// window costs under 0.1 s of CPU.
	settleEnd := time.Now().Add(10 * time.Minute)
	for prevCPU := cpuSeconds(b, pid); ; {
		time.Sleep(10 * time.Second)
		c := cpuSeconds(b, pid)
		if c-prevCPU < 0.1 {
			break
		}
		if time.Now().After(settleEnd) {
			b.Fatalf("pilot-discovery still busy 10 minutes after ready (%.2f s CPU in the last 10 s)", c-prevCPU)
		}
		prevCPU = c
	}
	settled := time.Since(readyAt)
	startupCPU := cpuSeconds(b, pid)
	c0 := startupCPU
	time.Sleep(30 * time.Second)
	c1 := cpuSeconds(b, pid)
	st := procStatus(b, pid)
	b.ReportMetric(st["VmRSS"]/1024, "rss-MiB")
	b.ReportMetric(st["RssAnon"]/1024, "rss-anon-MiB")
	b.ReportMetric((c1-c0)*100/30, "idle-cpu-%")
	b.ReportMetric(startupCPU, "startup-cpu-s")
	b.Logf("VmRSS %.1f MiB (anon %.1f, file %.1f), VmHWM %.1f MiB; CPU %.2f s until idle (%v after ready), idle CPU %.2f s over 30 s",
		st["VmRSS"]/1024, st["RssAnon"]/1024, st["RssFile"]/1024, st["VmHWM"]/1024, startupCPU, settled.Round(time.Second), c1-c0)
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
