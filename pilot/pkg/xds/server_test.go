// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	sotwclient "github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
)

func seedEnv(t *testing.T, o envOptions) *env {
	if o.gateways == nil {
		o.gateways = []model.Gateway{seedGateway(), otherGateway()}
	}
	if o.endpoints == nil {
		o.endpoints = baseEndpoints()
	}
	return newEnv(t, o)
}

func seedNode() *corev3.Node {
	return node("router~10.244.0.20~gw-1.gateway-namespace", "gateway-namespace", "gateway")
}
func otherNode() *corev3.Node {
	return node("router~10.244.0.30~gw-1.other-ns", "other-ns", "other-gw")
}

// TestSotWSeed runs go-control-plane's state-of-the-world ADS client, one
// stream per type (wildcard requests), and checks the seed's configuration.
func TestSotWSeed(t *testing.T) {
	e := seedEnv(t, envOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := core.Resources{}
	for _, typeURL := range []string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType} {
		c := sotwclient.NewADSClient(ctx, seedNode(), typeURL)
		if err := c.InitConnect(e.conn); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Fetch()
		if err != nil {
			t.Fatal(err)
		}
		checkAnys(t, resp.Resources)
		if err := c.Ack(); err != nil {
			t.Fatal(err)
		}
		for _, a := range resp.Resources {
			m, _ := a.UnmarshalNew()
			switch m := m.(type) {
			case *clusterv3.Cluster:
				got.Clusters = append(got.Clusters, m)
			case *endpointv3.ClusterLoadAssignment:
				got.Endpoints = append(got.Endpoints, m)
			case *listenerv3.Listener:
				got.Listeners = append(got.Listeners, m)
			case *routev3.RouteConfiguration:
				got.Routes = append(got.Routes, m)
			}
		}
	}
	if err := core.Validate(got); err != nil {
		t.Fatalf("served set fails core.Validate: %v", err)
	}
	var clusters []string
	for _, c := range got.Clusters {
		clusters = append(clusters, c.GetName())
	}
	if diff := cmp.Diff([]string{seedShadowCluster, seedEPPCluster}, clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	eps := map[string][]string{}
	for _, cla := range got.Endpoints {
		eps[cla.GetClusterName()] = claAddrs(cla)
	}
	want := map[string][]string{
		seedShadowCluster: {"10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000"},
		seedEPPCluster:    {"10.244.0.16:9002"},
	}
	if diff := cmp.Diff(want, eps); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	if len(got.Listeners) != 1 || got.Listeners[0].GetName() != "0.0.0.0_80" {
		t.Errorf("listeners: %v", got.Listeners)
	}
	if len(got.Routes) != 1 || got.Routes[0].GetName() != "http.80" {
		t.Fatalf("routes: %v", got.Routes)
	}
	if vh := got.Routes[0].GetVirtualHosts(); len(vh) != 1 || !cmp.Equal(vh[0].GetDomains(), []string{"llm.ssup2.com"}) {
		t.Errorf("virtual hosts: %v", vh)
	}
}

func claAddrs(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range cla.GetEndpoints() {
		for _, ep := range l.GetLbEndpoints() {
			sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, sa.GetAddress()+":"+itoa2(sa.GetPortValue()))
		}
	}
	sort.Strings(out)
	return out
}

func itoa2(p uint32) string {
	s := ""
	for p > 0 || s == "" {
		s = string(rune('0'+p%10)) + s
		p /= 10
	}
	return s
}

// deltaSubscribe opens the four types on a delta stream the way Envoy does
// (CDS and LDS wildcard, EDS and RDS by name), acking each response, and
// returns the resource names received per type.
func deltaSubscribe(t *testing.T, c *deltaClient, eds, rds []string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, step := range []struct {
		typeURL string
		names   []string
	}{{resourcev3.ClusterType, nil}, {resourcev3.EndpointType, eds}, {resourcev3.ListenerType, nil}, {resourcev3.RouteType, rds}} {
		c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: step.typeURL, ResourceNamesSubscribe: step.names})
		r := c.recv()
		if r.GetTypeUrl() != step.typeURL {
			t.Fatalf("asked for %s, got %s", step.typeURL, r.GetTypeUrl())
		}
		for _, res := range r.GetResources() {
			got[step.typeURL] = append(got[step.typeURL], res.GetName())
		}
		c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: step.typeURL, ResponseNonce: r.GetNonce()})
	}
	return got
}

// TestDeltaScaleSendsOnlyThatCluster: scaling the pool from 3 to 5 pods
// sends exactly that cluster's ClusterLoadAssignment on the seed proxy's
// delta stream, and nothing to another Gateway's proxy.
func TestDeltaScaleSendsOnlyThatCluster(t *testing.T) {
	e := seedEnv(t, envOptions{})
	seedProxy, otherProxy := e.delta(seedNode()), e.delta(otherNode())
	got := deltaSubscribe(t, seedProxy, []string{seedShadowCluster, seedEPPCluster}, []string{"http.80"})
	if diff := cmp.Diff([]string{seedShadowCluster, seedEPPCluster}, sorted(got[resourcev3.EndpointType])); diff != "" {
		t.Errorf("initial EDS (-want +got):\n%s", diff)
	}
	deltaSubscribe(t, otherProxy, []string{otherShadowCluster, otherEPPCluster}, []string{"http.80"})

	e.endpoints.UpdateObject(seedEndpoints(5))

	r := seedProxy.recv()
	if r.GetTypeUrl() != resourcev3.EndpointType || len(r.GetResources()) != 1 || len(r.GetRemovedResources()) != 0 {
		t.Fatalf("want one ClusterLoadAssignment, got type %s, %d resources, removed %v", r.GetTypeUrl(), len(r.GetResources()), r.GetRemovedResources())
	}
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := r.GetResources()[0].GetResource().UnmarshalTo(cla); err != nil {
		t.Fatal(err)
	}
	want := []string{"10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000", "10.244.0.16:8000", "10.244.0.17:8000"}
	if cla.GetClusterName() != seedShadowCluster || !cmp.Equal(want, claAddrs(cla)) {
		t.Fatalf("got %s %v", cla.GetClusterName(), claAddrs(cla))
	}
	seedProxy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: r.GetNonce()})
	seedProxy.quiet("after the scale-up")
	otherProxy.quiet("another Gateway's proxy")
}

// TestSotWEndpointChangeSendsOnlyThatCluster: on a SotW stream, EDS
// responses carry only the changed assignment.
func TestSotWEndpointChangeSendsOnlyThatCluster(t *testing.T) {
	e := seedEnv(t, envOptions{})
	c := e.sotw(seedNode())
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{seedShadowCluster, seedEPPCluster}})
	r := c.recv()
	if len(r.GetResources()) != 2 {
		t.Fatalf("initial EDS: %d resources", len(r.GetResources()))
	}
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{seedShadowCluster, seedEPPCluster},
		VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
	c.quiet("after ACK")
	e.endpoints.UpdateObject(seedEndpoints(5))
	r2 := c.recv()
	if len(r2.GetResources()) != 1 || r2.GetVersionInfo() == r.GetVersionInfo() {
		t.Fatalf("want 1 resource at a new version, got %d at %s (was %s)", len(r2.GetResources()), r2.GetVersionInfo(), r.GetVersionInfo())
	}
}

// TestNACKNotResent: a NACK is not answered with the same version; the next
// change is sent.
func TestNACKNotResent(t *testing.T) {
	e := seedEnv(t, envOptions{})
	c := e.sotw(seedNode())
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	v1 := c.recv()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: v1.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: "test rejects this"}})
	c.quiet("after a NACK")

	if n := counterValue(t, e, "infermesh_xds_nacks_total", "cds"); n != 1 {
		t.Errorf("nacks_total{type=cds} = %v, want 1", n)
	}
	st := e.srv.tracker.Status()
	if len(st) != 1 || st[0].Types["cds"].Nacked != v1.GetVersionInfo() || st[0].Types["cds"].NackMessage != "test rejects this" {
		t.Errorf("syncz after NACK: %+v", st)
	}

	// TLS towards the EPP changes only CDS.
	e.gateways.UpdateObject(seedmodel.GatewayEPPTLS(model.EPPTLS{InsecureSkipVerify: true}))
	v2 := c.recv()
	if v2.GetVersionInfo() == v1.GetVersionInfo() {
		t.Fatalf("got version %s again", v2.GetVersionInfo())
	}
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: v2.GetNonce(), VersionInfo: v2.GetVersionInfo()})
	waitFor(t, "ack recorded", func() bool {
		st := e.srv.tracker.Status()
		return len(st) == 1 && st[0].Types["cds"].Acked == v2.GetVersionInfo() && st[0].Types["cds"].Nacked == ""
	})
}

// TestInvalidResourceKeepsLastGood: a resource that turns invalid in the
// push path is never served; its last good version stays (so CDS, whose
// only change is the invalid cluster, is not sent again), while the valid
// route change of the same push is served. A translation that fails as a
// whole keeps the last good version of everything.
func TestInvalidResourceKeepsLastGood(t *testing.T) {
	var poison atomic.Bool
	e := seedEnv(t, envOptions{mutate: func(gw string, res *core.Resources) {
		if poison.Load() && gw == seedGatewayKey {
			res.Clusters[0].ConnectTimeout = durationpb.New(-time.Second) // connect_timeout must be > 0
		}
	}})
	c := e.sotw(seedNode())
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	cds := c.recv()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: cds.GetNonce(), VersionInfo: cds.GetVersionInfo()})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: []string{"http.80"}})
	rds := c.recv()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: []string{"http.80"}, ResponseNonce: rds.GetNonce(), VersionInfo: rds.GetVersionInfo()})
	c.quiet("after ACKs")

	poison.Store(true)
	e.gateways.UpdateObject(withHost(seedGateway(), "new.example.com"))
	r := c.recv()
	if r.GetTypeUrl() != resourcev3.RouteType {
		t.Fatalf("got %s, want RDS (CDS keeps its last good version)", r.GetTypeUrl())
	}
	if d := unmarshalRoute(t, r).GetVirtualHosts()[0].GetDomains(); !cmp.Equal(d, []string{"new.example.com"}) {
		t.Errorf("domains %v", d)
	}
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: []string{"http.80"}, ResponseNonce: r.GetNonce(), VersionInfo: r.GetVersionInfo()})
	c.quiet("the invalid cluster")
	waitFor(t, "rejection counted", func() bool { return counterValue(t, e, "infermesh_xds_rejected_total", "gateway") >= 1 })
	if got := e.srv.serving.get(seedGatewayKey); len(got) != 1 || got[0].Name != seedShadowCluster || !got[0].LastGood {
		t.Errorf("refused %+v", got)
	}

	poison.Store(false)
	untranslatable := withHost(seedGateway(), "broken.example.com")
	// A class whose parameters do not resolve: BuildListeners refuses the
	// Gateway as a whole.
	untranslatable.ClassParametersError = "ConfigMap istio-system/params not found"
	e.gateways.UpdateObject(untranslatable)
	waitFor(t, "translation failure recorded", func() bool {
		got := e.srv.serving.get(seedGatewayKey)
		return len(got) == 1 && got[0].Type == "translation" && got[0].LastGood
	})
	c.quiet("a Gateway that cannot be translated")

	e.gateways.UpdateObject(withHost(seedGateway(), "fixed.example.com"))
	r = c.recv()
	if r.GetTypeUrl() != resourcev3.RouteType {
		t.Fatalf("got %s, want RDS", r.GetTypeUrl())
	}
	if d := unmarshalRoute(t, r).GetVirtualHosts()[0].GetDomains(); !cmp.Equal(d, []string{"fixed.example.com"}) {
		t.Errorf("domains %v", d)
	}
	if got := e.srv.serving.get(seedGatewayKey); got != nil {
		t.Errorf("refused after the fix: %+v", got)
	}
}

// TestNoResponseBeforeSynced: a proxy connecting while an input collection
// has not synced gets nothing until it syncs.
func TestNoResponseBeforeSynced(t *testing.T) {
	synced := krt.NewManualSyncer()
	e := seedEnv(t, envOptions{endpointsSynced: synced})
	c := e.sotw(seedNode())
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	d := e.delta(seedNode())
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	c.quiet("before sync")
	d.quiet("before sync")
	if code := httpGet(t, e, "/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("/ready before sync: %d", code)
	}
	synced.MarkSynced()
	if r := c.recv(); len(r.GetResources()) != 2 {
		t.Errorf("CDS after sync: %d clusters", len(r.GetResources()))
	}
	if r := d.recv(); len(r.GetResources()) != 1 {
		t.Errorf("LDS after sync: %d listeners", len(r.GetResources()))
	}
	if code := httpGet(t, e, "/ready"); code != http.StatusOK {
		t.Errorf("/ready after sync: %d", code)
	}
}

// TestNodeWithoutGateway: a node without the metadata ends the stream with
// InvalidArgument.
func TestNodeWithoutGateway(t *testing.T) {
	e := seedEnv(t, envOptions{})
	c := e.sotw(&corev3.Node{Id: "no-metadata"})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	// Responses before the end, were there any, are not what is checked.
	deadline := time.Now().Add(recvTimeout)
	for {
		_, err := c.s.Recv(time.Until(deadline))
		if errors.Is(err, adsclient.ErrNoResponse) {
			t.Fatal("stream not ended")
		}
		if err != nil {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), MetadataGatewayName) {
				t.Fatalf("got %v", err)
			}
			return
		}
	}
}

func withHost(gw model.Gateway, host string) model.Gateway {
	r := *gw.Listeners[0].Routes[0]
	r.Hostnames = []string{host}
	gw.Listeners = []model.Listener{gw.Listeners[0]}
	gw.Listeners[0].Routes = []*model.Route{&r}
	return gw
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(recvTimeout)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func counterValue(t *testing.T, e *env, name, label string) float64 {
	t.Helper()
	mfs, err := e.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func httpGet(t *testing.T, e *env, path string) int {
	t.Helper()
	resp, err := http.Get(e.http.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
