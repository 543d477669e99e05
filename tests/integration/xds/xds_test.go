// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package xds_test runs pilot-discovery's stages in process (pilot/pkg/bootstrap)
// against a real cluster and reads its configuration as a Gateway's proxy
// would: go-control-plane's state-of-the-world client, and the tests' delta
// client (pkg/test/adsclient).
package xds_test

import (
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	sotw "github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pkg/test/adsclient"
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
	seedProxy := adsclient.NewDelta(t, conn, controller.ProxyNode("delta-seed", seed.GatewayNamespace, seed.GatewayName))
	otherProxy := adsclient.NewDelta(t, conn, controller.ProxyNode("delta-other", seed.GatewayNamespace, "other"))
	must(t, seedProxy.Subscribe(resource.EndpointType, shadowCluster, eppCluster))
	got := map[string][]string{}
	for len(got[shadowCluster]) != 3 || len(got[eppCluster]) != 1 {
		r := recv(t, seedProxy)
		clas, err := adsclient.Assignments(adsclient.Resources(r))
		if err != nil {
			t.Fatal(err)
		}
		for i, cla := range clas {
			got[r.GetResources()[i].GetName()] = adsclient.Addresses(cla)
		}
		must(t, seedProxy.ACK(r))
	}
	if want := []string{"10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000"}; !slices.Equal(got[shadowCluster], want) {
		t.Errorf("shadow endpoints = %v, want %v", got[shadowCluster], want)
	}
	must(t, otherProxy.Subscribe(resource.ClusterType))
	must(t, otherProxy.ACK(recv(t, otherProxy))) // its first CDS answer
	must(t, otherProxy.Subscribe(resource.ListenerType))
	must(t, otherProxy.ACK(recv(t, otherProxy)))

	// Scale 3 -> 5: one ClusterLoadAssignment on the seed proxy's delta
	// stream, nothing on the other Gateway's.
	if _, err := kubeenv.CreateReadyPods(ctx, kc, seed.Namespace, "vllm-more", map[string]string{"app": seed.PoolName}, 8000,
		"10.244.0.17", "10.244.0.18"); err != nil {
		t.Fatal(err)
	}
	for {
		r := recv(t, seedProxy)
		if r.GetTypeUrl() != resource.EndpointType {
			t.Fatalf("scaling pods sent a %s response", r.GetTypeUrl())
		}
		if len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != shadowCluster || len(r.GetRemovedResources()) != 0 {
			t.Fatalf("scaling pods sent %d resources (first %q), removed %v; want only %s",
				len(r.GetResources()), r.GetResources()[0].GetName(), r.GetRemovedResources(), shadowCluster)
		}
		cla := assignment(t, r)
		must(t, seedProxy.ACK(r))
		if len(adsclient.Addresses(cla)) == 5 { // the slice may grow in two steps
			break
		}
	}
	if err := otherProxy.Quiet(2 * time.Second); err != nil {
		t.Fatalf("the other Gateway's proxy after the seed pool scaled: %v", err)
	}

	// A NACK is not answered by a resend of the same version; the next
	// change is sent.
	if _, err := kubeenv.CreateReadyPods(ctx, kc, seed.Namespace, "vllm-nack", map[string]string{"app": seed.PoolName}, 8000,
		"10.244.0.19"); err != nil {
		t.Fatal(err)
	}
	for {
		r := recv(t, seedProxy)
		if slices.Contains(adsclient.Addresses(assignment(t, r)), "10.244.0.19:8000") {
			must(t, seedProxy.NACK(r, "test: rejected on purpose"))
			break
		}
		must(t, seedProxy.ACK(r))
	}
	if err := seedProxy.Quiet(2 * time.Second); err != nil {
		t.Fatalf("after a NACK: %v", err)
	}
	if _, err := kubeenv.CreateReadyPods(ctx, kc, seed.Namespace, "vllm-after-nack", map[string]string{"app": seed.PoolName}, 8000,
		"10.244.0.20"); err != nil {
		t.Fatal(err)
	}
	cla := assignment(t, recv(t, seedProxy))
	if !slices.Contains(adsclient.Addresses(cla), "10.244.0.20:8000") {
		t.Errorf("the change after the NACK: endpoints %v lack 10.244.0.20:8000", adsclient.Addresses(cla))
	}
}

// recv reads d's next response within wait and checks each resource with
// adsclient.Validate.
func recv(t *testing.T, d *adsclient.Delta) *discoveryv3.DeltaDiscoveryResponse {
	t.Helper()
	r, err := d.Recv(wait)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range r.GetResources() {
		m, err := res.GetResource().UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		if err := adsclient.Validate(m); err != nil {
			t.Errorf("%s: %v", res.GetName(), err)
		}
	}
	return r
}

// must fails the test on a send's error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// assignment is the response's first resource, a ClusterLoadAssignment.
func assignment(t *testing.T, r *discoveryv3.DeltaDiscoveryResponse) *endpointv3.ClusterLoadAssignment {
	t.Helper()
	clas, err := adsclient.Assignments(adsclient.Resources(r)[:1])
	if err != nil {
		t.Fatal(err)
	}
	return clas[0]
}
