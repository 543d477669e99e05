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

// nodeName is the one Node that runs pods.
const nodeName = "conformance-node"

// clusterSpec is what differs between the suites' clusters: their address
// ranges and link names, so that neither collides with the integration
// packages (10.244.0.x, .30.x, .31.x, .60.x, .64.x) nor with the other
// suite's, and the CRDs each suite checks.
type clusterSpec struct {
	// podCIDR is the pod network; the node's bridge holds its first address.
	podCIDR netip.Prefix
	// lbCIDR is where the load-balancer stand-in takes Service addresses.
	lbCIDR netip.Prefix
	// bridgePrefix starts the node's bridge name, then "-" and our PID in
	// hex. (Pod network namespaces are named by pkg/test/node from each
	// pod's UID and our PID, so they cannot collide either.)
	bridgePrefix string
	// crds are the CRD manifests installed before kube-controller-manager
	// starts: the Gateway API channel the suite checks, at the version the
	// suite binary (the argument) was built with, and the InferencePool CRD,
	// which pilot-discovery watches.
	crds func(suite string) ([]string, error)
}

var (
	// gieCluster is the GIE suite's: the Gateway API standard channel of
	// the release the GIE suite is built against (v1.6.1 for the suite
	// v1.6.0, which refuses any other bundle version).
	gieCluster = clusterSpec{
		podCIDR: netip.MustParsePrefix("10.244.96.0/24"), lbCIDR: netip.MustParsePrefix("10.244.97.0/24"),
		bridgePrefix: "imcf", crds: func(suite string) ([]string, error) { return suiteCRDs(suite, "standard") },
	}
	// gatewayAPICluster is the Gateway API suite's: the experimental
	// channel, for HTTPRoute's retry (gateway-api-conformance.md, Setup).
	gatewayAPICluster = clusterSpec{
		podCIDR: netip.MustParsePrefix("10.244.98.0/24"), lbCIDR: netip.MustParsePrefix("10.244.99.0/24"),
		bridgePrefix: "imga", crds: func(suite string) ([]string, error) { return suiteCRDs(suite, "experimental") },
	}
)

// suiteCRDs are the Gateway API CRDs of channel at the version the suite
// binary was built with (SuiteGatewayAPIVersion), and the InferencePool
// CRD of go.mod's GIE release.
func suiteCRDs(suite, channel string) ([]string, error) {
	version, err := SuiteGatewayAPIVersion(suite)
	if err != nil {
		return nil, err
	}
	paths, err := kubeenv.GatewayAPICRDsAt(channel, version)
	if err != nil {
		return nil, err
	}
	pool, err := kubeenv.InferencePoolCRD()
	if err != nil {
		return nil, err
	}
	return append(paths, pool), nil
}

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
	spec     clusterSpec
}

// startCluster starts the control plane with the scheduler and spec's
// CRDs, then the node agent with images on spec's pod network; all stop
// at the test's end.
func startCluster(t *testing.T, spec clusterSpec, suite string, images map[string]node.Image, stateDir string) *cluster {
	t.Helper()
	crds, err := spec.crds(suite)
	if err != nil {
		t.Fatal(err)
	}
	// The ServiceAccount admission plugin on (kubeenv turns it off by
	// default): every pod gets its kube-api-access volume, for in-cluster config.
	env := kubeenv.Start(t, kubeenv.WithScheduler(), kubeenv.WithControllers(controllers...), kubeenv.WithCRDs(crds...),
		kubeenv.WithServiceAccountAdmission())
	// Istio's DestinationRule CRD: the install gives the endpoint pickers'
	// Services client TLS through DestinationRules (install.go, eppTLSRules).
	dr, err := kubeenv.DestinationRuleCRD()
	if err != nil {
		t.Fatal(err)
	}
	env.ApplyCRDs(dr)
	c := &cluster{env: env, config: env.RESTConfig(), stateDir: stateDir, spec: spec,
		bridge: fmt.Sprintf("%s-%x", spec.bridgePrefix, os.Getpid())}
	c.client = kubernetes.NewForConfigOrDie(c.config)
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The cluster DNS serves on the bridge address, which every pod
	// reaches through its default route (architecture/node.md, "Cluster DNS").
	dnsAddr := spec.podCIDR.Masked().Addr().Next()
	n, err := node.Start(context.Background(), node.Config{
		Client: c.client, RESTConfig: c.config, NodeName: nodeName,
		PodCIDR: spec.podCIDR, BridgeName: c.bridge, Images: images,
		StateDir: filepath.Join(stateDir, "node"), ClusterDNS: []netip.Addr{dnsAddr},
		// pods/log through the API server (the Gateway API suite's mirror
		// tests read the mirror backends' logs).
		KubeletClientCA: env.KubeletClientCA(),
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
