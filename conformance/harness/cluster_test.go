// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/infermesh/infermesh/pkg/test/clusterdns"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/node"
)

const (
	// nodeName is the one Node that runs pods.
	nodeName = "conformance-node"
	// podCIDR is the pod network; no integration package uses it
	// (they use 10.244.0.x, .30.x, .31.x and .64.x).
	podCIDR = "10.244.96.0/24"
	// lbCIDR is where the load-balancer stand-in takes Service addresses.
	lbCIDR = "10.244.97.0/24"
)

// controllers are kube-controller-manager's controllers beyond kubeenv's
// defaults (endpointslice, endpointslice-mirroring, garbage-collector,
// serviceaccount): Deployments make ReplicaSets make Pods; the suite's
// cleanup deletes Namespaces; node-lifecycle lifts the not-ready taint the
// apiserver puts on a new Node once the node agent reports it Ready, so that
// kube-scheduler binds pods to it.
var controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"namespace-controller",
	"node-lifecycle-controller",
	// kube-root-ca.crt in every namespace: the CA of in-cluster config.
	"root-ca-certificate-publisher-controller",
}

// cluster is the running control plane with its node.
type cluster struct {
	env    *kubeenv.Env
	config *rest.Config
	client kubernetes.Interface
	node   *node.Node
	// bridge is the node's bridge link.
	bridge string
	// stateDir holds the node's pod folders and container logs.
	stateDir string
}

// startCluster starts the control plane with the scheduler and the
// CRDs, then the node agent with images; all stop at the test's end.
func startCluster(t *testing.T, images map[string]node.Image, stateDir string) *cluster {
	t.Helper()
	// The ServiceAccount admission plugin on (kubeenv turns it off by
	// default): every pod gets its kube-api-access volume, for in-cluster config.
	env := kubeenv.Start(t, kubeenv.WithScheduler(), kubeenv.WithControllers(controllers...), kubeenv.WithStandardCRDs(),
		kubeenv.WithServiceAccountAdmission())
	// Istio's DestinationRule CRD: the install gives the endpoint pickers'
	// Services client TLS through DestinationRules (install.go, eppTLSRules).
	dr, err := kubeenv.DestinationRuleCRD()
	if err != nil {
		t.Fatal(err)
	}
	env.ApplyCRDs(dr)
	c := &cluster{env: env, config: env.RESTConfig(), stateDir: stateDir, bridge: fmt.Sprintf("imcf-%x", os.Getpid())}
	c.client = kubernetes.NewForConfigOrDie(c.config)
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The cluster DNS serves on the bridge address, which every pod
	// reaches through its default route (architecture/node.md, "Cluster DNS").
	dnsAddr := netip.MustParsePrefix(podCIDR).Addr().Next()
	n, err := node.Start(context.Background(), node.Config{
		Client: c.client, RESTConfig: c.config, NodeName: nodeName,
		PodCIDR: netip.MustParsePrefix(podCIDR), BridgeName: c.bridge, Images: images,
		StateDir: filepath.Join(stateDir, "node"), ClusterDNS: []netip.Addr{dnsAddr},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.node = n
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	})
	startDNS(t, c.client, dnsAddr)
	if err := c.kubernetesEndpoints(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// kubernetesEndpoints gives the default/kubernetes Service its endpoint,
// which kube-apiserver writes on a cluster: kubeenv's listens on 127.0.0.1
// (an address an EndpointSlice may not hold) with its endpoint reconciler
// off, so the endpoint is the node's forwarder to it on the bridge.
func (c *cluster) kubernetesEndpoints(ctx context.Context) error {
	host, portStr, err := net.SplitHostPort(c.node.APIAddress())
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "kubernetes",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	_, err = c.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Create(ctx, slice, metav1.CreateOptions{})
	return err
}

// startDNS serves the cluster DNS on addr:53 until the test ends; names
// outside cluster.local go to the host's nameservers, as CoreDNS's
// `forward . /etc/resolv.conf`.
func startDNS(t *testing.T, client kubernetes.Interface, addr netip.Addr) {
	t.Helper()
	upstream, err := clusterdns.Upstreams("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	dns, err := clusterdns.Start(context.Background(), clusterdns.Config{Client: client, Addr: netip.AddrPortFrom(addr, 53).String(), Upstream: upstream})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Stop)
}
