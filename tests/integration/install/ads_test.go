// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package install_test

import (
	"crypto/x509"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// adsConn dials the ADS address over TLS, trusting only caPool and checking
// the certificate is adsServerName's.
func adsConn(t *testing.T, addr string, caPool *x509.CertPool) *grpc.ClientConn {
	t.Helper()
	return adsclient.Dial(t, addr, adsclient.TLS(caPool, adsServerName))
}

// gatewayRef is a Gateway's namespace and name.
type gatewayRef struct{ namespace, name string }

// seedGatewayRef is the seed Gateway.
var seedGatewayRef = gatewayRef{seed.GatewayNamespace, seed.GatewayName}

// proxy is one state-of-the-world ADS stream of a proxy that names a
// Gateway, sending its token (when not empty) as "authorization: Bearer".
type proxy struct {
	*adsclient.SotW
	id string
}

// openProxy opens the stream; it ends when within has passed or the test
// ends.
func openProxy(t *testing.T, conn *grpc.ClientConn, id string, gw gatewayRef, token string, within time.Duration) *proxy {
	t.Helper()
	return &proxy{SotW: adsclient.NewSotW(t, conn, proxyNode(id, gw), adsclient.Token(token), adsclient.Within(within)), id: id}
}

// request subscribes to names of typeURL (none: all of them). A send may
// fail once the server ended the stream; Recv then returns its status,
// which is what callers check.
func (p *proxy) request(typeURL string, names ...string) { _ = p.Request(typeURL, names...) }

// next reads responses within wait, ACKing each (keeping the type's
// subscription), until one of typeURL ("": any), and returns it.
func (p *proxy) next(t *testing.T, typeURL string) *discoveryv3.DiscoveryResponse {
	t.Helper()
	for {
		r, err := p.Recv(wait)
		if err != nil {
			t.Fatalf("%s: %s: %v", p.id, typeURL, err)
		}
		_ = p.ACK(r)
		if typeURL == "" || r.GetTypeUrl() == typeURL {
			return r
		}
	}
}

// clusters asks for CDS and reads responses until a CDS one holds want,
// and returns that response's clusters by name, each checked with
// ValidateAll.
func (p *proxy) clusters(t *testing.T, want string) map[string]*clusterv3.Cluster {
	t.Helper()
	p.request(resource.ClusterType)
	for {
		cs, err := adsclient.Clusters(p.next(t, resource.ClusterType).GetResources())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*clusterv3.Cluster{}
		for _, c := range cs {
			if err := c.ValidateAll(); err != nil {
				t.Errorf("cluster %s: %v", c.GetName(), err)
			}
			got[c.GetName()] = c
		}
		if got[want] != nil {
			return got
		}
	}
}

// endpoints subscribes to EDS for cluster and reads responses until its
// ClusterLoadAssignment has n endpoints; it returns them as address:port,
// sorted.
func (p *proxy) endpoints(t *testing.T, cluster string, n int) []string {
	t.Helper()
	p.request(resource.EndpointType, cluster)
	for {
		clas, err := adsclient.Assignments(p.next(t, resource.EndpointType).GetResources())
		if err != nil {
			t.Fatal(err)
		}
		for _, cla := range clas {
			if addrs := adsclient.Addresses(cla); cla.GetClusterName() == cluster && len(addrs) >= n {
				return addrs
			}
		}
	}
}

// secrets reads responses until an SDS one and returns its secrets'
// names, each checked to unmarshal.
func (p *proxy) secrets(t *testing.T) []string {
	t.Helper()
	ss, err := adsclient.Secrets(p.next(t, resource.SecretType).GetResources())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range ss {
		names = append(names, s.GetName())
	}
	return names
}

// denied asks for CDS and checks that the stream ends with code before any
// response arrives.
func (p *proxy) denied(t *testing.T, code codes.Code) {
	t.Helper()
	p.request(resource.ClusterType)
	r, err := p.Recv(wait)
	if err == nil {
		t.Fatalf("%s: got a %s response with %d resources, want the stream to end with %s",
			p.id, r.GetTypeUrl(), len(r.GetResources()), code)
	}
	if status.Code(err) != code {
		t.Fatalf("%s: stream ended with %v, want code %s", p.id, err, code)
	}
}

// proxyNode is the xDS node of a proxy of gw: its metadata names the
// Gateway, as a Gateway deployment's Envoy does.
func proxyNode(id string, gw gatewayRef) *corev3.Node {
	md, err := structpb.NewStruct(map[string]any{
		xds.MetadataGatewayNamespace: gw.namespace, xds.MetadataGatewayName: gw.name,
	})
	if err != nil {
		panic(err) // two strings always convert
	}
	return &corev3.Node{Id: id, Metadata: md}
}
