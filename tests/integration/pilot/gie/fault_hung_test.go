// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/eppproxy"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// hungIP is the hung EPP's pod address.
const hungIP = "10.244.0.18"

// A hung EPP: it accepts the ext_proc stream and never answers.
//
// EPP: a tiny fake ext_proc server (hungEPP) at 10.244.0.18:9002 in the
// test's network namespace, behind its own EPP Service, for the pool
// "hung" (FailOpen, the seed's pods); its route (x-gie-pool: hung) sets
// HTTPRoute timeouts.request 300ms. The harness's lightweight EPP serves
// only the seed's pool. Request shape: GET /health, bodiless, so nothing
// but the request headers message is ever owed an answer, and FailOpen
// would apply to any failure.
//
// Why this needs care: with FULL_DUPLEX_STREAMED body modes Envoy starts no
// per-message timer (message_timeout is not applied), the processor never
// fails, so failure_mode_allow has nothing to allow, and RouteAction.timeout
// is the router's: it starts once the whole request has reached the router,
// which never sees a request the ext_proc filter is still holding. So
// pilot-discovery writes timeouts.request as RouteAction.max_stream_duration
// too (pilot/pkg/networking/core/route.go, buildAction), which Envoy's
// connection manager counts from the stream's start: the request ends at
// the route timeout with Envoy's local reply 504 "downstream duration
// timeout" (504, not 408, because the bodiless request was fully received).
// The test data plane implements the same rule (pkg/test/dataplane,
// handler.go).
//
// Proves: the route with the 300ms bound is in effect; the hung EPP
// receives the request's headers; the client gets 504 "downstream duration
// timeout" no sooner than 300ms and well before its own deadline (10 times
// that); no model server receives the request, failure_mode_allow is not
// used, and no per-message timeout fires; the data plane ends the EPP stream
// (no stream is leaked); the seed's pool beside it keeps landing on its
// picks.
func TestEPPHung(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP, SpareIPs: []string{hungIP}})
	hung := startHungEPP(t, h, net.JoinHostPort(hungIP, strconv.Itoa(seed.EPPPort)))
	const pool, svc, routeTimeout = "hung", "hung-epp", 300 * time.Millisecond
	h.createEPPService(svc)
	h.createEPPPod(svc, hungIP)
	h.createPool(newPool(pool, seed.PoolName, svc, inferencev1.EndpointPickerFailOpen))
	r := headerRoute(pool, pool, poolRef(pool, 0))
	r.Spec.Rules[0].Timeouts = &gwv1.HTTPRouteTimeouts{Request: ptr.To(gwv1.Duration("300ms"))}
	h.createRoute(r)
	h.waitEndpoints(eppClusterOf(svc), []string{net.JoinHostPort(hungIP, strconv.Itoa(seed.EPPPort))})
	h.waitEndpoints(shadowClusterOf(pool), []string{ep(pod13), ep(pod14), ep(pod15)})
	h.waitRouteConfig("the hung pool's route with its 300ms stream bound",
		routesTo(`"exact":"hung"`, shadowClusterOf(pool), eppClusterOf(svc), `"maxStreamDuration":{"maxStreamDuration":"0.300s"}`))
	h.waitPicking(get())

	dp := h.dataPlane()
	var allowed0, timeouts0, reached0 int64
	if dp != nil {
		c := dp.ExtProcCounters()
		allowed0, timeouts0, reached0 = c.FailureModeAllowed.Load(), c.MessageTimeouts.Load(), dp.Counters().MaxDurationReached
	}
	received := servedTotal(h)
	clientWait := 10 * routeTimeout
	ctx, cancel := context.WithTimeout(t.Context(), clientWait)
	defer cancel()
	done := make(chan result, 1)
	start := time.Now()
	go func() { done <- h.send(ctx, onPool(get(), pool)) }()

	// The hung EPP gets the request's headers (and never answers).
	var id string
	select {
	case id = <-hung.opened:
	case res := <-done:
		t.Fatalf("%v: the request ended before the hung EPP saw its stream", res)
	case <-time.After(waitConfig):
		t.Fatalf("the hung EPP saw no stream within %v", waitConfig)
	}
	res := <-done
	took := time.Since(start)
	if res.Err != nil || res.Status != 504 || string(res.Body) != "downstream duration timeout" {
		t.Fatalf("%v after %v (the hung EPP's stream: request %q): want 504 \"downstream duration timeout\" at the route's %v bound",
			res, took.Round(time.Millisecond), id, routeTimeout)
	}
	if took < routeTimeout {
		t.Fatalf("answered after %v, before the route's %v bound", took, routeTimeout)
	}
	if id != res.ID {
		t.Fatalf("the hung EPP's stream carried request id %q, want %q", id, res.ID)
	}
	t.Logf("hung EPP, route timeout %v: 504 %q after %v", routeTimeout, res.Body, took.Round(time.Millisecond))
	if got := servedTotal(h) - received; got != 0 {
		t.Fatalf("model servers answered %d requests; none got past the hung EPP", got)
	}
	if dp != nil {
		c := dp.ExtProcCounters()
		if got := c.FailureModeAllowed.Load() - allowed0; got != 0 {
			t.Fatalf("%d failure_mode_allow continuations: a hung EPP is no failure", got)
		}
		if got := c.MessageTimeouts.Load() - timeouts0; got != 0 {
			t.Fatalf("%d per-message timeouts: FULL_DUPLEX_STREAMED applies none", got)
		}
		if got := dp.Counters().MaxDurationReached - reached0; got != 1 {
			t.Fatalf("%d requests ended by max_stream_duration, want 1", got)
		}
	}

	// The stream's end reaches the EPP: no stream is leaked.
	select {
	case <-hung.cancelled:
	case <-time.After(waitConfig):
		t.Fatalf("the hung EPP's stream was not cancelled within %v of the local reply", waitConfig)
	}

	// The seed's pool beside it is unaffected.
	for range 5 {
		h.landedOnPick(h.mustSend(get()))
	}
}

// hungEPP is an ext_proc server that reads each stream's first message
// (the request headers), reports the stream's x-test-request-id on opened,
// then never answers; it reports on cancelled when the data plane ends
// the stream.
type hungEPP struct {
	extprocsvc.UnimplementedExternalProcessorServer
	opened    chan string
	cancelled chan struct{}
}

func (e *hungEPP) Process(s extprocsvc.ExternalProcessor_ProcessServer) error {
	m, err := s.Recv()
	if err != nil {
		return err
	}
	id := ""
	for _, hv := range m.GetRequestHeaders().GetHeaders().GetHeaders() {
		if hv.GetKey() == eppproxy.DefaultRequestIDHd {
			id = string(hv.GetRawValue())
			if id == "" {
				id = hv.GetValue()
			}
		}
	}
	select {
	case e.opened <- id:
	default:
	}
	<-s.Context().Done()
	select {
	case e.cancelled <- struct{}{}:
	default:
	}
	return s.Context().Err()
}

// startHungEPP serves a hungEPP (plaintext HTTP/2) on addr in the test's
// network namespace until the test ends.
func startHungEPP(t *testing.T, h *harness, addr string) *hungEPP {
	t.Helper()
	ln, err := h.netns.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("hung EPP on %s: %v", addr, err)
	}
	e := &hungEPP{opened: make(chan string, 1), cancelled: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	extprocsvc.RegisterExternalProcessorServer(srv, e)
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	t.Cleanup(func() {
		srv.Stop() // ends the streams still held
		wg.Wait()
	})
	return e
}
