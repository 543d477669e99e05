// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

// startSim serves one simulated vLLM pod at ip on every target port,
// inside the test's network namespace. One vllmsim.Server per pod: its
// x-inference-port says which port a request came in on.
func (h *harness) startSim(ip string) *vllmsim.Server {
	h.t.Helper()
	cfg := vllmsim.Config{PodName: podName(ip), Model: baseModel, LoRAs: []string{loraModel}, MaxLoRAs: 2}
	if h.opts.Sim != nil {
		h.opts.Sim(&cfg)
	}
	sim := vllmsim.New(cfg)
	var servers []*http.Server
	var wg sync.WaitGroup
	for _, p := range h.opts.TargetPorts {
		ln, err := h.netns.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(p))))
		if err != nil {
			h.t.Fatalf("simulator %s: %v", podName(ip), err)
		}
		srv := &http.Server{Handler: sim}
		servers = append(servers, srv)
		wg.Go(func() { _ = srv.Serve(ln) })
	}
	// Registered after NewNetNS, so it runs before the namespace goes.
	h.t.Cleanup(func() {
		_ = sim.Close() // fails held requests, so Shutdown does not wait on them
		for _, s := range servers {
			_ = s.Shutdown(context.Background())
		}
		wg.Wait()
	})
	h.sims[ip] = sim
	return sim
}
