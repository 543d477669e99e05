// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/dataplane"
	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// pilot-discovery restarted mid-traffic.
//
// EPP: the lightweight EPP (GIE v1.6.2, plaintext), which does not depend
// on pilot-discovery. Request shape: GET /health, bodiless, from three
// clients back to back, a new connection each.
//
// Proves: while pilot-discovery is stopped the data plane is disconnected
// (Connected false) and keeps serving its last configuration; the restarted
// pilot-discovery (new informers, new ADS server, same address) is
// reconnected to and its pushes are accepted (ACKs after the restart, no
// NACK). Then a second restart while kube-apiserver is down: the data
// plane connects to a pilot-discovery that cannot sync (the connection is
// counted on its listener), keeps serving, and is answered only once
// kube-apiserver is back and the new pilot-discovery has synced. Not one
// request fails across the whole run, and each lands on its
// recorded pick; every configuration the data plane had in effect, observed
// at every change (WaitFor), holds exactly the initial listeners, route
// configurations and clusters with the seed's endpoints: never an empty or
// partial one.
func TestPilotRestartMidTraffic(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP})
	h.waitPicking(get())
	dp := h.dataPlane()
	var w *configWatch
	if dp != nil {
		w = watchConfig(t, dp, true)
	}

	tr := h.startTraffic(map[string]request{"a": get(), "b": get(), "c": get()})
	tr.waitCount(t, 0, 30, "before the restart")

	h.pilot.Stop()
	if dp != nil {
		waitSnapshot(t, dp, "the data plane to see pilot-discovery gone", func(s dataplane.Snapshot) bool { return !s.Connected })
	}
	tr.waitCount(t, tr.count(), 30, "while pilot-discovery is down")

	var acks int64
	if dp != nil {
		acks = dp.Counters().ACKs
	}
	h.pilot.Restart()
	if dp != nil {
		// A new stream: LDS and CDS, then RDS and EDS by name, each
		// answered by the new server and accepted.
		waitSnapshot(t, dp, "the data plane to reconnect and accept the new server's pushes", func(s dataplane.Snapshot) bool {
			return s.Connected && s.Counters.ACKs >= acks+4
		})
	}
	tr.waitCount(t, tr.count(), 30, "after the restart")

	// Again, while kube-apiserver is down: the new pilot-discovery accepts
	// the data plane's stream but cannot sync, so it must answer nothing
	// (an empty configuration would take the listener away) until it has
	// synced, after kube-apiserver's return.
	h.env.StopAPIServer()
	h.pilot.Stop()
	lis, err := net.Listen("tcp", h.pilot.Addr())
	if err != nil {
		t.Fatalf("listen again on %s: %v", h.pilot.Addr(), err)
	}
	cl := &countingListener{Listener: lis}
	h.pilot.RestartOn(cl)
	poll.Until(t, waitConfig, "the data plane's connection to the unsynced pilot-discovery", func() bool { return cl.accepted.Load() > 0 })
	tr.waitCount(t, tr.count(), 30, "with pilot-discovery connected but unsynced")
	if dp != nil {
		acks = dp.Counters().ACKs
	}
	h.env.StartAPIServer()
	if dp != nil {
		waitSnapshot(t, dp, "the synced pilot-discovery's pushes", func(s dataplane.Snapshot) bool {
			return s.Connected && s.Counters.ACKs >= acks+4
		})
	}
	tr.waitCount(t, tr.count(), 30, "after the second restart")
	tr.stop()

	t.Log(tr.summary())
	if f := tr.failures(); len(f) != 0 {
		t.Fatalf("%d requests failed across the restarts, first %v", len(f), f[0])
	}
	h.checkLandedOnPicks(tr)
	if w != nil {
		w.check(t)
	}
}

// kube-apiserver restarted mid-traffic.
//
// EPP: the lightweight EPP (GIE v1.6.2, plaintext). Request shape: GET
// /health from three clients, as above.
//
// Proves: with kube-apiserver killed (kubeenv StopAPIServer) traffic
// continues: pilot-discovery, the EPP and the data plane keep what they
// have; after it is back (StartAPIServer: same port, certificates and etcd
// data) a change to the seed's HTTPRoute (a response header added) made
// then is applied: pilot-discovery's informers resumed and pushed it, and
// the Gateway's responses carry the header; not one request fails across
// the run, each lands on its pick, and the data plane never lost its
// configuration.
func TestAPIServerRestartMidTraffic(t *testing.T) {
	h := newHarness(t, options{EPP: epp.LWEPP})
	h.waitPicking(get())
	dp := h.dataPlane()
	var w *configWatch
	if dp != nil {
		// The route changes below on purpose: compare names and endpoints.
		w = watchConfig(t, dp, false)
	}

	tr := h.startTraffic(map[string]request{"a": get(), "b": get(), "c": get()})
	tr.waitCount(t, 0, 30, "before the restart")
	h.env.StopAPIServer()
	tr.waitCount(t, tr.count(), 30, "while kube-apiserver is down")
	h.env.StartAPIServer()
	tr.waitCount(t, tr.count(), 30, "after kube-apiserver is back")

	// The change made after the return.
	routes := h.gateways.GatewayV1().HTTPRoutes(seed.Namespace)
	r, err := routes.Get(t.Context(), seed.RouteName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Spec.Rules[0].Filters = append(r.Spec.Rules[0].Filters, gwv1.HTTPRouteFilter{
		Type: gwv1.HTTPRouteFilterResponseHeaderModifier,
		ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{
			Set: []gwv1.HTTPHeader{{Name: "x-gie-after-restart", Value: "applied"}},
		},
	})
	if _, err := routes.Update(t.Context(), r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitConfig)
	for n := 0; ; n++ {
		if v := h.responseHeader(get(), "x-gie-after-restart"); v == "applied" {
			t.Logf("the change made after kube-apiserver's return served after %d probes", n+1)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the route change made after kube-apiserver's return was not applied within %v", waitConfig)
		}
		time.Sleep(20 * time.Millisecond) // back-off of a bounded poll on the Gateway's answer
	}
	tr.waitCount(t, tr.count(), 30, "after the change")
	tr.stop()

	t.Log(tr.summary())
	if f := tr.failures(); len(f) != 0 {
		t.Fatalf("%d requests failed across the kube-apiserver restart, first %v", len(f), f[0])
	}
	h.checkLandedOnPicks(tr)
	if w != nil {
		w.check(t)
	}
}

// countingListener counts accepted connections: the data plane reaching a
// restarted pilot-discovery.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// responseHeader sends r to the Gateway and returns the response's header
// k ("" on any error).
func (h *harness) responseHeader(r request, k string) string {
	req, err := http.NewRequestWithContext(h.t.Context(), r.Method, "http://"+h.gw.Addr()+r.Path, nil)
	if err != nil {
		return ""
	}
	req.Host = seed.Hostname
	resp, err := gatewayClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Header.Get(k)
}

// waitSnapshot waits (bounded) until the data plane's snapshot satisfies
// cond.
func waitSnapshot(t *testing.T, dp *dataplane.DataPlane, what string, cond func(dataplane.Snapshot) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitConfig)
	defer cancel()
	if err := dp.WaitFor(ctx, cond); err != nil {
		s := dp.Snapshot()
		t.Fatalf("waiting for %s: %v (connected %v, counters %+v, last NACK %+v)", what, err, s.Connected, s.Counters, s.LastNACK)
	}
}

// configWatch observes every configuration the data plane has in effect
// (WaitFor calls its predicate at every configuration or connection change)
// and compares it with the first: the same listeners, route configurations
// (with routes, also their content) and clusters, each cluster with the same
// endpoints.
type configWatch struct {
	routes bool
	cancel context.CancelFunc
	done   chan struct{}

	mu          sync.Mutex
	want        string
	seen        int
	disconnects int
	bad         []string
	nacks       int64
}

// watchConfig starts watching dp; the configuration in effect now is the
// reference.
func watchConfig(t *testing.T, dp *dataplane.DataPlane, routes bool) *configWatch {
	s := dp.Snapshot()
	w := &configWatch{routes: routes, want: shape(s, routes), done: make(chan struct{}), nacks: s.Counters.NACKs}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		_ = dp.WaitFor(ctx, func(s dataplane.Snapshot) bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.seen++
			if !s.Connected {
				w.disconnects++
			}
			if got := shape(s, w.routes); got != w.want && len(w.bad) < 5 {
				w.bad = append(w.bad, got)
			}
			if s.Counters.NACKs != w.nacks && len(w.bad) < 5 {
				w.bad = append(w.bad, fmt.Sprintf("NACK: %+v", s.LastNACK))
				w.nacks = s.Counters.NACKs
			}
			return false
		})
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *configWatch) stop() {
	w.cancel()
	<-w.done
}

// check stops the watch and fails t if any configuration differed from
// the first, or any response was NACKed.
func (w *configWatch) check(t *testing.T) {
	t.Helper()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("configurations observed: %d (%d while disconnected)", w.seen, w.disconnects)
	if len(w.bad) != 0 {
		t.Fatalf("the data plane had a configuration other than its first:\nwant %s\ngot  %s", w.want, w.bad)
	}
}

// shape is a snapshot's listener, route and cluster names and each
// cluster's endpoints, sorted; with routes, each route configuration's
// content too.
func shape(s dataplane.Snapshot, routes bool) string {
	eps := map[string][]string{}
	for c, e := range s.Endpoints {
		eps[c] = slices.Sorted(slices.Values(e))
	}
	var clusters []string
	for _, c := range slices.Sorted(maps.Keys(s.Clusters)) {
		clusters = append(clusters, fmt.Sprintf("%s=%v", c, eps[c]))
	}
	rs := slices.Sorted(maps.Keys(s.Routes))
	if routes {
		for i, name := range rs {
			rs[i] = compact(protojson.Format(s.Routes[name]))
		}
	}
	return fmt.Sprintf("listeners %v routes %v clusters %v", slices.Sorted(maps.Keys(s.Listeners)), rs, clusters)
}
