// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"context"
	"errors"
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
// HTTPRoute timeouts.request 300ms, which pilot-discovery writes as the
// RouteAction timeout. The harness's lightweight EPP serves only the seed's
// pool. Request shape: GET /health, bodiless, so nothing but the request
// headers message is ever owed an answer, and FailOpen would apply to any
// failure.
//
// What happens, and this test documents it: the request does NOT end at
// the route timeout. In Envoy the route timeout is the router's: it
// "spans between the point at which the entire downstream request (i.e.
// end-of-stream) has been processed and when the upstream response has been
// completely processed" (RouteAction.timeout), and the router never sees a
// request the ext_proc filter is still holding; with FULL_DUPLEX_STREAMED
// body modes Envoy starts no per-message timer either (message_timeout is
// not applied), and the processor never failed, so failure_mode_allow has
// nothing to allow. The test data plane does the same: the route timeout
// starts in its router, after ext_proc. What bounds the request is the
// client, or Envoy's stream_idle_timeout (5 minutes by default; not
// modelled by the test data plane). pilot-discovery's comment on
// extProcOverride (pilot/pkg/networking/core/extproc.go) says the route
// timeout bounds a hung EPP: on Envoy it does not (RouteAction
// max_stream_duration, which the connection manager enforces from route
// selection, would).
//
// Proves: the route with the 300ms timeout is in effect; the hung EPP
// receives the request's headers; the client gets no response at all for 10
// times the route timeout (its own deadline then ends the wait), no model
// server receives the request, failure_mode_allow is not used, and no
// per-message timeout fires; once the client has gone, the data plane
// cancels the EPP stream (no stream is leaked); the seed's pool beside it
// keeps landing on its picks.
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
	h.waitRouteConfig("the hung pool's route with its 300ms timeout",
		routesTo(`"exact":"hung"`, shadowClusterOf(pool), eppClusterOf(svc), `"timeout":"0.300s"`))
	h.waitPicking(get())

	dp := h.dataPlane()
	var allowed0, timeouts0 int64
	if dp != nil {
		c := dp.ExtProcCounters()
		allowed0, timeouts0 = c.FailureModeAllowed.Load(), c.MessageTimeouts.Load()
	}
	received := servedTotal(h)
	clientWait := 10 * routeTimeout
	ctx, cancel := context.WithTimeout(t.Context(), clientWait)
	defer cancel()
	done := make(chan result, 1)
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
	if res.Err == nil || res.Status != 0 || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Fatalf("%v: want no response at all until the client's own deadline (%v), since the route timeout (%v) does not cover a request held by ext_proc", res, clientWait, routeTimeout)
	}
	if id != res.ID {
		t.Fatalf("the hung EPP's stream carried request id %q, want %q", id, res.ID)
	}
	t.Logf("hung EPP, route timeout %v: the client waited its full %v and got no response (%v)", routeTimeout, clientWait, res.Err)
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
	}

	// The client went away: the data plane cancels the EPP stream.
	select {
	case <-hung.cancelled:
	case <-time.After(waitConfig):
		t.Fatalf("the hung EPP's stream was not cancelled within %v of the client giving up", waitConfig)
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
