// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// marshalAll is the wire form of every resource, in order.
func marshalAll(t *testing.T, res Resources) []byte {
	t.Helper()
	var buf bytes.Buffer
	var msgs []proto.Message
	for _, m := range res.Listeners {
		msgs = append(msgs, m)
	}
	for _, m := range res.Routes {
		msgs = append(msgs, m)
	}
	for _, m := range res.Clusters {
		msgs = append(msgs, m)
	}
	for _, m := range res.Endpoints {
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
	}
	return buf.Bytes()
}

// The same inputs give the same bytes: no map order reaches the wire.
func TestBuildGatewayIsDeterministic(t *testing.T) {
	mk := func() *model.Gateway {
		var routes []*model.Route
		for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
			p := pool("llm", "pool-"+n, inferencev1.EndpointPickerFailOpen)
			routes = append(routes, httpRoute("llm", "r-"+n, []string{n + ".example.com", "shared.example.com"},
				model.Rule{Backends: []model.Backend{{Weight: 1, Pool: p}, {Weight: 2, Service: svc("web", n, 80)}}}))
		}
		return gateway(routes...)
	}
	in := seedInputs()
	first := marshalAll(t, build(t, mk(), in, inferenceOn))
	for i := 0; i < 20; i++ {
		if got := marshalAll(t, build(t, mk(), in, inferenceOn)); !bytes.Equal(first, got) {
			t.Fatalf("run %d differs from the first", i)
		}
	}
}
