// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/peer"
	"k8s.io/utils/clock"
)

// nackThroughCallbacks opens stream 1 from peerAddr, sends it CDS version v1
// and has the proxy NACK it with msg, all through go-control-plane's
// callbacks; it returns the tracker and what it logged.
func nackThroughCallbacks(t *testing.T, peerAddr net.Addr, msg string) (*tracker, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	tr := newTracker(slog.New(slog.NewJSONHandler(&logs, nil)), newMetrics(), clock.RealClock{})
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: peerAddr})
	if err := tr.OnStreamOpen(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	req := &discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, Node: seedNode()}
	if err := tr.OnStreamRequest(1, req); err != nil {
		t.Fatal(err)
	}
	tr.OnStreamResponse(ctx, 1, req, &discoveryv3.DiscoveryResponse{TypeUrl: resourcev3.ClusterType, VersionInfo: "v1", Nonce: "n1"})
	if err := tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: "n1",
		ErrorDetail: &rpcstatus.Status{Message: msg}}); err != nil {
		t.Fatal(err)
	}
	return tr, &logs
}

// TestNackMessageCapped: a proxy's 1 MB NACK message is kept as its first
// KiB and a marker, in /debug/syncz and in the log line.
func TestNackMessageCapped(t *testing.T) {
	msg := strings.Repeat("x", 1<<20)
	tr, logs := nackThroughCallbacks(t, &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4567}, msg)
	st := tr.Status()
	if len(st) != 1 || st[0].Types["cds"] == nil || st[0].Types["cds"].Nacked != "v1" {
		t.Fatalf("syncz after the NACK: %+v", st)
	}
	got := st[0].Types["cds"].NackMessage
	want := strings.Repeat("x", 1024) + "... (1047552 bytes more)"
	if got != want {
		t.Errorf("syncz nackMessage: %d bytes ending %q, want %d bytes ending %q", len(got), tail(got), len(want), tail(want))
	}
	if logs.Len() > 4<<10 {
		t.Errorf("the NACK's log line is %d bytes, want at most 4 KiB", logs.Len())
	}
	if !strings.Contains(logs.String(), "... (1047552 bytes more)") {
		t.Errorf("the NACK's log line lacks the marker: %s", tail(logs.String()))
	}
}

func tail(s string) string {
	if len(s) > 40 {
		return s[len(s)-40:]
	}
	return s
}

// TestSynczPeer: each stream's entry carries its connection's remote
// address, so two streams with one node id are told apart.
func TestSynczPeer(t *testing.T) {
	tr, _ := nackThroughCallbacks(t, &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4567}, "no")
	b, err := json.Marshal(tr.Status())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"stream":1`) || !strings.Contains(string(b), `"peer":"10.1.2.3:4567"`) {
		t.Errorf("syncz entry lacks the stream id or the peer address: %s", b)
	}
}

func TestTruncateMessage(t *testing.T) {
	if got := truncateMessage("short"); got != "short" {
		t.Errorf("short message changed: %q", got)
	}
	exact := strings.Repeat("a", MaxNackMessage)
	if got := truncateMessage(exact); got != exact {
		t.Errorf("a message of exactly MaxNackMessage bytes was cut")
	}
	// A 3-byte rune straddles the cut: it is left out whole.
	s := strings.Repeat("a", MaxNackMessage-1) + "€" + "bc"
	want := strings.Repeat("a", MaxNackMessage-1) + "... (5 bytes more)"
	if got := truncateMessage(s); got != want {
		t.Errorf("truncateMessage = ...%q, want ...%q", tail(got), tail(want))
	}
}
