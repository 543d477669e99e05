// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// TestGatewayBuilderDirect calls the transformation without a pipeline.
func TestGatewayBuilderDirect(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	var out *GatewayResources
	gws := krt.NewStaticCollection(nil, []model.Gateway{seedmodel.GatewayEPPTLS(model.EPPTLS{InsecureSkipVerify: true})}, krt.WithStop(stop))
	res := krt.NewCollection(gws, GatewayBuilder(core.Options{InferenceEnabled: true}), krt.WithStop(stop))
	if !res.WaitUntilSynced(stop) {
		t.Fatal("not synced")
	}
	out = res.GetKey(seedGatewayKey)
	if out == nil || out.Err != "" {
		t.Fatalf("got %+v", out)
	}
	if diff := cmp.Diff([]string{seedShadowCluster, seedEPPCluster}, out.EDSNames); diff != "" {
		t.Errorf("EDS names (-want +got):\n%s", diff)
	}
	for _, c := range out.Clusters {
		if c.GetName() == seedEPPCluster && c.GetTransportSocket() == nil {
			t.Error("EPP cluster without the TLS its EPPBackend asks for")
		}
	}
	// A Gateway the builders refuse (an HTTPS listener without TLS, which
	// the controller never hands over): the error is carried in Err.
	broken := seedGateway()
	broken.Listeners[0].Protocol = gwv1.HTTPSProtocolType
	bad := krt.NewCollection(krt.NewStaticCollection(nil, []model.Gateway{broken}, krt.WithStop(stop)),
		GatewayBuilder(core.Options{InferenceEnabled: true}), krt.WithStop(stop))
	if !bad.WaitUntilSynced(stop) {
		t.Fatal("not synced")
	}
	if g := bad.GetKey(seedGatewayKey); g == nil || g.Err == "" || len(g.Clusters) != 0 {
		t.Errorf("want a translation error, got %+v", g)
	}
}

// TestOnlyChangedGatewaysRebuilt: a Gateway's change (here its EPP's TLS,
// which the controller puts in the model) rebuilds that Gateway only.
func TestOnlyChangedGatewaysRebuilt(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	gws := krt.NewStaticCollection(nil, []model.Gateway{seedGateway(), otherGateway()}, krt.WithStop(stop))
	res := krt.NewCollection(gws, GatewayBuilder(core.Options{InferenceEnabled: true}), krt.WithStop(stop))
	if !res.WaitUntilSynced(stop) {
		t.Fatal("not synced")
	}
	runs := func() uint64 { return krt.Stats(res).Transformations }
	base := runs()
	gws.UpdateObject(seedmodel.GatewayEPPTLS(model.EPPTLS{InsecureSkipVerify: true}))
	waitFor(t, "seed rebuilt", func() bool { return res.GetKey(seedGatewayKey).Clusters[1].GetTransportSocket() != nil })
	time.Sleep(50 * time.Millisecond) // room for a wrong extra run to show
	if got := runs() - base; got != 1 {
		t.Errorf("a change of one Gateway ran %d transformations, want 1", got)
	}
}
