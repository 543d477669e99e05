// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"bytes"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/modelgen"
)

// TestRouteConfigurationFromVirtualHostBytes: a route configuration
// encoded from its virtual hosts' bytes (encodeRouteConfiguration, with
// and without the last encoding to reuse from) is byte for byte what
// marshalOpts (deterministic) makes of it, and its entry has the same
// version; over the translations of random Gateways after random changes,
// the 50-route benchmark Gateway, and configurations with fields on both
// sides of virtual_hosts.
func TestRouteConfigurationFromVirtualHostBytes(t *testing.T) {
	var rcs []*routev3.RouteConfiguration
	gw, _ := benchGateway(50)
	big, err := core.BuildRouteConfigurations(&gw, core.Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	rcs = append(rcs, big...)
	rcs = append(rcs, &routev3.RouteConfiguration{}, &routev3.RouteConfiguration{Name: "only-name"},
		&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{Name: "nameless-rc"}, {}}},
		&routev3.RouteConfiguration{Name: "around", VirtualHosts: big[0].GetVirtualHosts()[:3],
			ValidateClusters: wrapperspb.Bool(false), IgnorePortInHostMatching: true, MaxDirectResponseBodySizeBytes: wrapperspb.UInt32(7),
			RequestHeadersToAdd:     []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "a", Value: "b"}}},
			ResponseHeadersToRemove: []string{"c"}, InternalOnlyHeaders: []string{"d"}})
	for seed := uint64(1); seed <= 5; seed++ {
		w := modelgen.New(seed)
		tr := core.NewTranslator(core.Options{InferenceEnabled: true})
		for range 30 {
			w.Step()
			res, err := tr.Build(w.Gateway(), core.Inputs{})
			if err == nil {
				rcs = append(rcs, res.Routes...)
			}
		}
	}
	var last *rcEncoding
	for i, rc := range rcs {
		want, err := marshalOpts.Marshal(rc)
		if err != nil {
			t.Fatal(err)
		}
		wantEntry, _ := newEntry(kindRoute, rc.GetName(), rc)
		for _, from := range []*rcEncoding{nil, last} {
			enc, err := encodeRouteConfiguration(rc, from)
			if err != nil {
				t.Fatal(err)
			}
			if got := enc.entry.any.GetValue(); !bytes.Equal(got, want) {
				t.Fatalf("configuration %d (%s): %d bytes from virtual hosts, %d marshalled", i, rc.GetName(), len(got), len(want))
			}
			if enc.entry.version != wantEntry.version {
				t.Fatalf("configuration %d: version %s, want %s", i, enc.entry.version, wantEntry.version)
			}
			for j, vh := range rc.GetVirtualHosts() {
				if b, _ := marshalOpts.Marshal(vh); !bytes.Equal(enc.vhBytes(j), b) {
					t.Fatalf("configuration %d virtual host %d: kept bytes are not its own", i, j)
				}
			}
			if from == nil {
				last = enc
			}
		}
		var back routev3.RouteConfiguration
		if err := proto.Unmarshal(want, &back); err != nil || !proto.Equal(&back, rc) {
			t.Fatalf("configuration %d does not round-trip: %v", i, err)
		}
	}
}
