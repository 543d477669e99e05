// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
)

// Everything pilot/pkg/networking/core builds for the seed is accepted.
func TestCoreSeedAccepted(t *testing.T) {
	gw := seedmodel.GatewayEPPTLS(model.UpstreamTLS{InsecureSkipVerify: true})
	res, err := core.BuildGateway(&gw, core.Inputs{Endpoints: map[string][]core.Endpoint{}}, core.Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range res.Listeners {
		n++
		if err := decodeMsg(t, resourcev3.ListenerType, l); err != nil {
			t.Errorf("listener: %v", err)
		}
	}
	for _, r := range res.Routes {
		n++
		if err := decodeMsg(t, resourcev3.RouteType, r); err != nil {
			t.Errorf("route: %v", err)
		}
	}
	for _, c := range res.Clusters {
		n++
		if err := decodeMsg(t, resourcev3.ClusterType, c); err != nil {
			t.Errorf("cluster: %v", err)
		}
	}
	for _, e := range res.Endpoints {
		n++
		if err := decodeMsg(t, resourcev3.EndpointType, e); err != nil {
			t.Errorf("endpoints: %v", err)
		}
	}
	if n < 5 {
		t.Fatalf("only %d resources built", n)
	}
}
