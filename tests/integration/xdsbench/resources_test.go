// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package xdsbench

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// BenchmarkPilotResources measures pilot-discovery's resident memory and
// CPU as a separate process against the real cluster holding the objects of
// BenchmarkChangeToPush's default case (1,000 InferencePools with one
// HTTPRoute each on 10 Gateways, 3,000 pods). After /ready it waits until
// the initial writes (1,000 pool and route statuses, shadow Services, 10
// Gateway deployments) are over: a 10 s window under 0.1 s of CPU. It then
// reports rss-MiB (VmRSS), rss-anon-MiB (RssAnon: private memory, without
// the binary's file-backed pages), idle-cpu-% (of one core, over 30 s) and
// startup-cpu-s (CPU from start to idle). Run it alone:
//
//	KUBE_TEST_BINARIES=$(hack/k8s-test-binaries.sh)/bin \
//	  go test -tags=integ -run '^$' -bench PilotResources -benchtime 1x -timeout 30m ./tests/integration/xdsbench/
func BenchmarkPilotResources(b *testing.B) {
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	b.Cleanup(func() { slog.SetDefault(prev) })
	env := kubeenv.Start(b, kubeenv.WithStandardCRDs(), kubeenv.WithControllerManagerArgs(kcmLoadArgs...))
	admin, err := kube.NewFromRESTConfig(env.RESTConfig(), kube.WithQPS(clientQPS), kube.WithBurst(clientBurst))
	if err != nil {
		b.Fatal(err)
	}
	setUp(b, admin, defaultSize)
	bin := buildPilot(b)
	kubeconfig := env.Kubeconfig
	for b.Loop() {
		measurePilot(b, bin, kubeconfig)
	}
}

func measurePilot(b *testing.B, bin, kubeconfig string) {
	p := startPilotProcess(b, bin, kubeconfig)
	defer p.Stop()
	p.waitReady(b, 5*time.Minute)
	pid := p.cmd.Process.Pid
	// After ready the leader writes every status and shadow Service of the
	// 1,000 pools (client-side rate limited); idle starts when a 10 s
	// window costs under 0.1 s of CPU.
	settled := p.waitQuiet(b, 10*time.Minute)
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
