// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// The expected tables are written by hand: istioctl's layout (cells padded
// to the column's widest cell plus 5 spaces, the last cell unpadded), with
// the seed's clusters and endpoints as its write-up shows them.

const seedClustersTable = `SERVICE FQDN                                                   PORT      SUBSET     DIRECTION     TYPE     DESTINATION RULE
vllm-llama3-8b-epp.llm-namespace.svc.cluster.local             9002      -          outbound      EDS      vllm-llama3-8b-epp-tls.llm-namespace
vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local     54321     -          outbound      EDS
`

const seedEndpointsTable = `ENDPOINT             STATUS      OUTLIER CHECK     CLUSTER
10.244.0.13:8000     HEALTHY     OK                outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local
10.244.0.14:8000     HEALTHY     OK                outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local
10.244.0.15:8000     HEALTHY     OK                outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local
`

const seedListenersTable = `ADDRESSES     PORT     MATCH     DESTINATION
0.0.0.0       80       ALL       Route: http.80
`

const seedRoutesTable = `NAME        VHOST NAME           DOMAINS           MATCH     ROUTE
http.80     llm.ssup2.com:80     llm.ssup2.com     /*        llm-namespace.llm-route.0
`

// istioDRMetadata is the cluster metadata istiod puts on a cluster its
// DestinationRule configures.
func istioDRMetadata(ns, name string) *corev3.Metadata {
	s, _ := structpb.NewStruct(map[string]any{"config": "/apis/networking.istio.io/v1/namespaces/" + ns + "/destination-rule/" + name})
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"istio": s}}
}

// TestClustersTableSeed renders the seed's two clusters, fixed by hand, in
// the order the server would not sort them.
func TestClustersTableSeed(t *testing.T) {
	eds := &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
	clusters := []*clusterv3.Cluster{
		{Name: seedShadowCluster, ClusterDiscoveryType: eds},
		{Name: seedEPPCluster, ClusterDiscoveryType: eds, Metadata: istioDRMetadata("llm-namespace", "vllm-llama3-8b-epp-tls")},
	}
	var b bytes.Buffer
	if err := writeClusters(&b, clusters); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(seedClustersTable, b.String()); d != "" {
		t.Errorf("clusters table (-want +got):\n%s", d)
	}
}

// seedResources is what the translator builds for the seed.
func seedResources(t *testing.T) core.Resources {
	t.Helper()
	gw := seedModel()
	in := core.Inputs{Endpoints: map[string][]model.Endpoint{}}
	for _, ce := range seedEndpoints() {
		in.Endpoints[ce.Cluster] = ce.Endpoints
	}
	res, err := core.BuildGateway(&gw, in, seedTranslate)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTablesFromTranslator renders the translator's output for the seed:
// endpoints (filtered to the shadow cluster, as the seed's grep does),
// listeners and routes.
func TestTablesFromTranslator(t *testing.T) {
	res := proxyResources{Resources: seedResources(t)}
	cases := []struct {
		name, kind, fqdn, want string
	}{
		{"endpoints", kindEndpoints, "vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local", seedEndpointsTable},
		{"listeners", kindListeners, "", seedListenersTable},
		{"routes", kindRoutes, "", seedRoutesTable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printResources(&b, tc.kind, outputShort, filterResources(res, "", tc.fqdn)); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, b.String()); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestParseClusterName(t *testing.T) {
	for in, want := range map[string]clusterName{
		seedEPPCluster:              {direction: "outbound", port: "9002", fqdn: "vllm-llama3-8b-epp.llm-namespace.svc.cluster.local"},
		"outbound|80|v1|a.b.svc":    {direction: "outbound", port: "80", subset: "v1", fqdn: "a.b.svc"},
		"infermesh|invalid-backend": {fqdn: "infermesh|invalid-backend"},
	} {
		if got := parseClusterName(in); got != want {
			t.Errorf("parseClusterName(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func TestHealthStatus(t *testing.T) {
	for in, want := range map[corev3.HealthStatus]string{
		corev3.HealthStatus_UNKNOWN:   "HEALTHY", // what the control plane sends for a ready endpoint
		corev3.HealthStatus_HEALTHY:   "HEALTHY",
		corev3.HealthStatus_DRAINING:  "DRAINING",
		corev3.HealthStatus_UNHEALTHY: "UNHEALTHY",
	} {
		if got := healthStatus(in); got != want {
			t.Errorf("healthStatus(%s) = %s, want %s", in, got, want)
		}
	}
}
