// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/proto"
)

// ackCache is a synced Cache holding one Gateway (bench-gw/gateway) with n
// EDS names, each with an assignment and a warm key, as the push path
// publishes the 10,000-pool Gateway of benchGateway (20,000 names).
func ackCache(n int) (*Cache, []string) {
	c := newCache(slog.New(slog.NewTextHandler(io.Discard, nil)), newMetrics())
	u := newUpdate()
	snap := &gatewaySnapshot{key: "bench-gw/gateway", warm: [numKinds]warmKeys{kindEndpoint: warmKeys{}}}
	for i := range n {
		name := benchShadowCluster(i)
		if i%2 == 1 {
			name = fmt.Sprintf("outbound|9002||pool-%04d-epp.bench.svc.cluster.local", i)
		}
		snap.edsNames = append(snap.edsNames, name)
		snap.warm[kindEndpoint][name] = fmt.Sprintf("%016x", i)
		u.eds[name] = entryOf(kindEndpoint, name, []byte(name))
	}
	slices.Sort(snap.edsNames)
	u.gateways[snap.key] = snap
	c.publish(u)
	return c, snap.edsNames
}

// BenchmarkEDSAck: the Cache's share of a proxy's EDS acknowledgement on a
// stream of the 10,000-pool Gateway (20,000 names), after the stream took
// the Gateway's assignments: the request's watch is opened (and parks,
// nothing changed) and the previous one cancelled, as go-control-plane does
// on every request. "known" is a stream the Cache knows (the server's
// stream callbacks); "unknown" one it does not, which compares every name,
// as every request did before. go-control-plane's own work on the same
// request is BenchmarkSotwRequestLibrary.
func BenchmarkEDSAck(b *testing.B) {
	for _, known := range []bool{true, false} {
		for _, delta := range []bool{false, true} {
			b.Run(fmt.Sprintf("known=%v/delta=%v", known, delta), func(b *testing.B) { benchAck(b, known, delta) })
		}
	}
}

func benchAck(b *testing.B, known, delta bool) {
	c, names := ackCache(20000)
	n := node("bench", "bench-gw", "gateway")
	key := streamKey{id: 1, delta: delta}
	sotwCh, deltaCh := make(chan cachev3.Response, 1), make(chan cachev3.DeltaResponse, 1)
	var sub stream.Subscription
	open := func(nonce string) func() {
		var cancel func()
		var err error
		if delta {
			req := &discoveryv3.DeltaDiscoveryRequest{Node: n, TypeUrl: resourcev3.EndpointType, ResponseNonce: nonce}
			if nonce == "" {
				req.ResourceNamesSubscribe = names
			}
			if known {
				c.noteRequest(key, req)
			}
			cancel, err = c.CreateDeltaWatch(req, sub, deltaCh)
		} else {
			req := &discoveryv3.DiscoveryRequest{Node: n, TypeUrl: resourcev3.EndpointType, ResponseNonce: nonce, ResourceNames: names}
			if known {
				c.noteRequest(key, req)
			}
			cancel, err = c.CreateWatch(req, sub, sotwCh)
		}
		if err != nil {
			b.Fatal(err)
		}
		return cancel
	}
	if delta {
		sub = stream.NewDeltaSubscription(names, nil, nil, true)
	} else {
		sub = stream.NewSotwSubscription(names, true)
	}
	cancel := open("")
	select {
	case r := <-sotwCh:
		sub.SetReturnedResources(r.GetReturnedResources())
	case r := <-deltaCh:
		sub.SetReturnedResources(r.GetNextVersionMap())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		cancel()
		cancel = open("1")
	}
	b.StopTimer()
	if len(sotwCh)+len(deltaCh) != 0 {
		b.Fatal("an acknowledgement was answered; nothing changed")
	}
}

// BenchmarkSotwRequestLibrary is the work outside our code on one SotW EDS
// request listing the 20,000 names of the 10,000-pool Gateway: "unmarshal"
// is the request's decoding (gRPC's codec), "subscription" go-control-
// plane's Subscription.SetResourceSubscription (processADS calls it on
// every request: a set of the names, and a pass over what was returned).
func BenchmarkSotwRequestLibrary(b *testing.B) {
	_, names := ackCache(20000)
	raw, err := proto.Marshal(&discoveryv3.DiscoveryRequest{
		Node: node("bench", "bench-gw", "gateway"), TypeUrl: resourcev3.EndpointType, VersionInfo: "0123456789abcdef",
		ResponseNonce: "7", ResourceNames: names,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for range b.N {
			var req discoveryv3.DiscoveryRequest
			if err := proto.Unmarshal(raw, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("subscription", func(b *testing.B) {
		returned := make(map[string]string, len(names))
		for _, n := range names {
			returned[n] = "0123456789abcdef/0123456789abcdef"
		}
		sub := stream.NewSotwSubscription(names, true)
		sub.SetReturnedResources(returned)
		b.ReportAllocs()
		for range b.N {
			sub.SetResourceSubscription(names)
		}
	})
}
