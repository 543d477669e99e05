// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pkg/test/adsclient"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

const fixedSyncz = `[
  {"stream": 1, "delta": false, "peer": "10.244.0.20:40312", "node": "router~10.244.0.20~gw-1.gateway-namespace", "gateway": "gateway-namespace/gateway",
   "userAgent": "envoy", "version": "1.37.2", "belowVersionFloor": true,
   "types": {
     "cds": {"sent": "00000000000000aa", "acked": "00000000000000aa"},
     "lds": {"sent": "00000000000000bb"},
     "eds": {"sent": "00000000000000cc", "acked": "00000000000000c0", "nacked": "00000000000000cc", "nackMessage": "bad endpoint"}
   },
   "refused": [{"type": "route", "name": "http.80/llm.ssup2.com:80/llm-namespace.llm-route.0", "error": "header value\r\nx: y"},
               {"type": "cluster", "name": "outbound|8080||svc.ns.svc.cluster.local", "lastGood": true, "error": "connect_timeout"}]},
  {"stream": 2, "delta": true, "node": "envoy-2", "gatewayError": "node \"envoy-2\": node.metadata must carry the Gateway", "types": {}},
  {"stream": 3, "delta": false, "node": "envoy-3", "gateway": "gateway-namespace/gateway", "userAgent": "envoy", "version": "1.40.0", "types": {},
   "refused": [{"type": "route", "name": "http.80/llm.ssup2.com:80/llm-namespace.llm-route.0", "error": "header value\r\nx: y"},
               {"type": "cluster", "name": "outbound|8080||svc.ns.svc.cluster.local", "lastGood": true, "error": "connect_timeout"}]}
]`

// Written by hand: one row per stream, a cell per type, the count of the
// Gateway's refused parts, the peer and stream id, the NACK's error after
// the table, then each Gateway's refused parts once, escaped.
const fixedProxyStatus = `NAME                                          GATEWAY                             STREAM     VERSION                        CDS                           LDS                                        EDS                           RDS          REFUSED     PEER
router~10.244.0.20~gw-1.gateway-namespace     gateway-namespace/gateway           sotw       envoy 1.37.2 (below floor)     SYNCED (00000000000000aa)     STALE (sent 00000000000000bb, acked -)     NACKED (00000000000000cc)     NOT SENT     2           10.244.0.20:40312 (stream 1)
envoy-2                                       - (no Gateway in node metadata)     delta      -                              NOT SENT                      NOT SENT                                   NOT SENT                      NOT SENT     -           - (stream 2)
envoy-3                                       gateway-namespace/gateway           sotw       envoy 1.40.0                   NOT SENT                      NOT SENT                                   NOT SENT                      NOT SENT     2           - (stream 3)

NACKs:
  router~10.244.0.20~gw-1.gateway-namespace gateway-namespace/gateway 10.244.0.20:40312 (stream 1) EDS 00000000000000cc: bad endpoint

Refused (failed validation in pilot-discovery):
  gateway-namespace/gateway route http.80/llm.ssup2.com:80/llm-namespace.llm-route.0 (left out): header value\r\nx: y
  gateway-namespace/gateway cluster outbound|8080||svc.ns.svc.cluster.local (last good version served): connect_timeout
`

func TestProxyStatusTable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/syncz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(fixedSyncz))
	}))
	defer srv.Close()
	out, err := run(t, defaultDeps(), "proxy-status", "--debug-address", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fixedProxyStatus, out); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestProxyStatusErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := run(t, defaultDeps(), "proxy-status", "--debug-address", srv.URL)
	wantErr(t, err, "/debug/syncz", "404")
	_, err = run(t, defaultDeps(), "proxy-status", "--debug-address", srv.URL, "-o", "yaml")
	wantErr(t, err, `-o "yaml": want short or json`)
}

// TestProxyStatusLive: a proxy that acked CDS and nacked LDS, as the
// running server's /debug/syncz reports it.
func TestProxyStatusLive(t *testing.T) {
	e := startXDS(t)
	node := proxyNode(gatewayRef{"gateway-namespace", "gateway"})
	node.Id = "router~10.244.0.20~gw-1.gateway-namespace"
	s := adsclient.NewSotW(t, adsclient.Dial(t, e.ads), node, adsclient.Within(10*time.Second))
	for _, step := range []struct {
		typeURL string
		nack    bool
	}{{resourcev3.ClusterType, false}, {resourcev3.ListenerType, true}} {
		if err := s.Request(step.typeURL); err != nil {
			t.Fatal(err)
		}
		r, err := s.Recv(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ack := s.ACK
		if step.nack {
			ack = func(r *discoveryv3.DiscoveryResponse) error { return s.NACK(r, "rejected by test") }
		}
		if err := ack(r); err != nil {
			t.Fatal(err)
		}
	}
	out := proxyStatusWhen(t, e.http.URL, "proxy-status showing the ACK and the NACK", func(out string) bool {
		return strings.Contains(out, "SYNCED (") && strings.Contains(out, "NACKED (") && strings.Contains(out, "rejected by test")
	})
	if !strings.Contains(out, "router~10.244.0.20~gw-1.gateway-namespace     gateway-namespace/gateway     sotw") {
		t.Errorf("row lacks node, Gateway and stream:\n%s", out)
	}
}

// proxyStatusWhen runs proxy-status against the debug server at url until
// cond holds of its output (within 10 s), and returns that output.
func proxyStatusWhen(t *testing.T, url, what string, cond func(out string) bool) string {
	t.Helper()
	var out string
	poll.UntilOr(t, 10*time.Second, what, func() bool {
		var err error
		out, err = run(t, defaultDeps(), "proxy-status", "--debug-address", url)
		if err != nil {
			t.Fatal(err)
		}
		return cond(out)
	}, func() string { return out })
	return out
}
