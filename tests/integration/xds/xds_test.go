// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package xds_test runs pilot-discovery's stages in process (pilot/pkg/bootstrap)
// against a real cluster and reads its configuration as a Gateway's proxy
// would: go-control-plane's state-of-the-world client, and a minimal delta
// client written here on the raw DeltaAggregatedResources stream.
package xds_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	sotw "github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pkg/test/controller"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

const (
	shadowCluster = "outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local"
	eppCluster    = "outbound|9002||vllm-llama3-8b-epp.llm-namespace.svc.cluster.local"
	wait          = 30 * time.Second
)

// applySeed creates the seed's objects, its three model-server pods and its
// EPP pod (ready, at the seed's addresses), and a second Gateway "other"
// with its own Service route, so that a change for one Gateway can be seen
// not to reach the other.
func applySeed(t *testing.T, env *kubeenv.Env) kubernetes.Interface {
	t.Helper()
	ctx := t.Context()
	cfg := env.RESTConfig()
	kc, gc := kubernetes.NewForConfigOrDie(cfg), gatewayclient.NewForConfigOrDie(cfg)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := seed.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	other := seed.Gateway()
	other.Name = "other"
	must(gc.GatewayV1().Gateways(seed.GatewayNamespace).Create(ctx, other, metav1.CreateOptions{}))
	must(kubeenv.CreateReadyPods(ctx, kc, seed.Namespace, "vllm", map[string]string{"app": seed.PoolName}, 8000,
		"10.244.0.13", "10.244.0.14", "10.244.0.15"))
	must(kubeenv.CreateReadyPods(ctx, kc, seed.Namespace, "epp", map[string]string{"app": seed.EPPName}, seed.EPPPort, "10.244.0.16"))
	return kc
}

// addresses lists a ClusterLoadAssignment's endpoints as address:port.
func addresses(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			a := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, net.JoinHostPort(a.GetAddress(), strconv.Itoa(int(a.GetPortValue()))))
		}
	}
	slices.Sort(out)
	return out
}

func TestSeedOverSotWAndDelta(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	kc := applySeed(t, env)
	conn := controller.StartPilot(t, env.RESTConfig(), 10*time.Millisecond, 100*time.Millisecond)
	ctx := t.Context()

	// go-control-plane's state-of-the-world client: CDS, wildcard.
	cds := sotw.NewADSClient(ctx, controller.ProxyNode("sotw-proxy", seed.GatewayNamespace, seed.GatewayName), resource.ClusterType)
	if err := cds.InitConnect(conn); err != nil {
		t.Fatal(err)
	}
	var names []string
	deadline := time.Now().Add(wait)
	for !slices.Contains(names, shadowCluster) || !slices.Contains(names, eppCluster) {
		if time.Now().After(deadline) {
			t.Fatalf("CDS never carried %s and %s; last: %v", shadowCluster, eppCluster, names)
		}
		resp, err := cds.Fetch()
		if err != nil {
			t.Fatal(err)
		}
		names = names[:0]
		for _, a := range resp.Resources {
			c := &clusterv3.Cluster{}
			if err := a.UnmarshalTo(c); err != nil {
				t.Fatal(err)
			}
			if err := c.ValidateAll(); err != nil {
				t.Errorf("cluster %s: %v", c.GetName(), err)
			}
			names = append(names, c.GetName())
			if c.GetName() == shadowCluster && c.GetLoadBalancingPolicy().GetPolicies()[0].GetTypedExtensionConfig().GetName() != "envoy.load_balancing_policies.override_host" {
				t.Errorf("shadow cluster load balancing policy = %v", c.GetLoadBalancingPolicy())
			}
		}
		if err := cds.Ack(); err != nil {
			t.Fatal(err)
		}
	}

	// The delta client: EDS for the shadow cluster and the EPP cluster, on
	// the seed Gateway's proxy and on the other Gateway's.
	seedProxy := newDeltaClient(t, conn, controller.ProxyNode("delta-seed", seed.GatewayNamespace, seed.GatewayName))
	otherProxy := newDeltaClient(t, conn, controller.ProxyNode("delta-other", seed.GatewayNamespace, "other"))
	seedProxy.subscribe(resource.EndpointType, shadowCluster, eppCluster)
	got := map[string][]string{}
	for len(got[shadowCluster]) != 3 || len(got[eppCluster]) != 1 {
		r := seedProxy.recv(wait)
		for _, res := range r.GetResources() {
			cla := &endpointv3.ClusterLoadAssignment{}
			if err := res.GetResource().UnmarshalTo(cla); err != nil {
				t.Fatal(err)
			}
			got[res.GetName()] = addresses(cla)
		}
		seedProxy.ack(r)
	}
	if want := []string{"10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000"}; !slices.Equal(got[shadowCluster], want) {
		t.Errorf("shadow endpoints = %v, want %v", got[shadowCluster], want)
	}
	otherProxy.subscribe(resource.ClusterType)
	otherProxy.ack(otherProxy.recv(wait)) // its first CDS answer
	otherProxy.subscribe(resource.ListenerType)
	otherProxy.ack(otherProxy.recv(wait))

	// Scale 3 -> 5: one ClusterLoadAssignment on the seed proxy's delta
	// stream, nothing on the other Gateway's.
	if _, err := kubeenv.CreateReadyPods(ctx, kc, seed.Namespace, "vllm-more", map[string]string{"app": seed.PoolName}, 8000,
		"10.244.0.17", "10.244.0.18"); err != nil {
		t.Fatal(err)
	}
	for {
		r := seedProxy.recv(wait)
		if r.GetTypeUrl() != resource.EndpointType {
			t.Fatalf("scaling pods sent a %s response", r.GetTypeUrl())
		}
		if len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != shadowCluster || len(r.GetRemovedResources()) != 0 {
			t.Fatalf("scaling pods sent %d resources (first %q), removed %v; want only %s",
				len(r.GetResources()), r.GetResources()[0].GetName(), r.GetRemovedResources(), shadowCluster)
		}
		cla := &endpointv3.ClusterLoadAssignment{}
		if err := r.GetResources()[0].GetResource().UnmarshalTo(cla); err != nil {
			t.Fatal(err)
		}
		seedProxy.ack(r)
		if len(addresses(cla)) == 5 { // the slice may grow in two steps
			break
		}
	}
	otherProxy.quiet(2*time.Second, "the other Gateway's proxy after the seed pool scaled")

	// A NACK is not answered by a resend of the same version; the next
	// change is sent.
	if _, err := kubeenv.CreateReadyPods(ctx, kc, seed.Namespace, "vllm-nack", map[string]string{"app": seed.PoolName}, 8000,
		"10.244.0.19"); err != nil {
		t.Fatal(err)
	}
	for {
		r := seedProxy.recv(wait)
		cla := &endpointv3.ClusterLoadAssignment{}
		if err := r.GetResources()[0].GetResource().UnmarshalTo(cla); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(addresses(cla), "10.244.0.19:8000") {
			seedProxy.nack(r, "test: rejected on purpose")
			break
		}
		seedProxy.ack(r)
	}
	seedProxy.quiet(2*time.Second, "after a NACK")
	if _, err := kubeenv.CreateReadyPods(ctx, kc, seed.Namespace, "vllm-after-nack", map[string]string{"app": seed.PoolName}, 8000,
		"10.244.0.20"); err != nil {
		t.Fatal(err)
	}
	r := seedProxy.recv(wait)
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := r.GetResources()[0].GetResource().UnmarshalTo(cla); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(addresses(cla), "10.244.0.20:8000") {
		t.Errorf("the change after the NACK: endpoints %v lack 10.244.0.20:8000", addresses(cla))
	}
}

// deltaClient is the minimal incremental xDS client of this test: one
// DeltaAggregatedResources stream, requests by hand, responses on a channel.
type deltaClient struct {
	t      *testing.T
	stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node   *corev3.Node
	in     chan *discoveryv3.DeltaDiscoveryResponse
}

func newDeltaClient(t *testing.T, conn *grpc.ClientConn, node *corev3.Node) *deltaClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &deltaClient{t: t, stream: s, node: node, in: make(chan *discoveryv3.DeltaDiscoveryResponse, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(c.in)
		for {
			r, err := s.Recv()
			if err != nil {
				return
			}
			c.in <- r
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func (c *deltaClient) subscribe(typeURL string, names ...string) {
	c.t.Helper()
	if err := c.stream.Send(&discoveryv3.DeltaDiscoveryRequest{Node: c.node, TypeUrl: typeURL, ResourceNamesSubscribe: names}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *deltaClient) ack(r *discoveryv3.DeltaDiscoveryResponse) {
	c.t.Helper()
	if err := c.stream.Send(&discoveryv3.DeltaDiscoveryRequest{Node: c.node, TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *deltaClient) nack(r *discoveryv3.DeltaDiscoveryResponse, msg string) {
	c.t.Helper()
	if err := c.stream.Send(&discoveryv3.DeltaDiscoveryRequest{Node: c.node, TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: msg}}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *deltaClient) recv(within time.Duration) *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	select {
	case r, ok := <-c.in:
		if !ok {
			c.t.Fatal("delta stream ended")
		}
		for _, res := range r.GetResources() {
			m, err := res.GetResource().UnmarshalNew()
			if err != nil {
				c.t.Fatal(err)
			}
			if v, ok := m.(interface{ ValidateAll() error }); ok {
				if err := v.ValidateAll(); err != nil {
					c.t.Errorf("%s: %v", res.GetName(), err)
				}
			}
		}
		return r
	case <-time.After(within):
		c.t.Fatalf("%s: no delta response within %v", c.node.GetId(), within)
	}
	return nil
}

// quiet fails if a response arrives within d (absence needs a window).
func (c *deltaClient) quiet(d time.Duration, why string) {
	c.t.Helper()
	select {
	case r, ok := <-c.in:
		if ok {
			c.t.Fatalf("%s: got a %s response with %d resources", why, r.GetTypeUrl(), len(r.GetResources()))
		}
	case <-time.After(d):
	}
}
